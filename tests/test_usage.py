"""Usage records: read from the credential proxy's file (twice-read lines stored once, hostile lines
skipped or bounded, an agent of another sandbox not believed), priced by settings usage.prices, and
summed and paged by the usage methods."""

import json
import os
import time
from decimal import Decimal

import pytest

from agents.models import Agent
from cocoon.actors import SYSTEM_ACTOR, Actor
from cocoon.choices import TokenScope
from cocoon.errors import CocoonError, InvalidParams
from cocoon.registry import registry
from sandboxes.models import Sandbox
from scheduling.models import Schedule, Task
from usage import ingest
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db

AGENT_ACTOR = Actor(token_id="t", name="steering agent", scope=TokenScope.AGENT)


def call(method: str, params: dict, actor: Actor = SYSTEM_ACTOR):
    return registry.dispatch(method, params, actor, "en")


def sandbox(name: str) -> Sandbox:
    return Sandbox.objects.create(name=name, image="i", network="egress", cpus=1, memory_mb=64, pids=16)


def line(sandbox_id: str, agent_id: str | None = None, **fields) -> bytes:
    record = {
        "id": os.urandom(16).hex(),
        "at": time.time(),
        "sandboxId": sandbox_id,
        "agentId": agent_id,
        "provider": "anthropic",
        "method": "POST",
        "path": "/v1/messages",
        "latencyMs": 812.5,
        "status": 200,
        "model": "claude-sonnet-4-5",
        "stream": True,
        "complete": True,
        "final": True,
        "inputTokens": 1000,
        "outputTokens": 200,
        "cacheWriteTokens": 300,
        "cacheReadTokens": 4000,
    }
    return json.dumps(record | fields).encode()


def test_the_proxys_file_is_read_once_no_write_can_touch_it_and_a_line_read_twice_is_stored_once(tmp_path):
    box = sandbox("s")
    lines = [line(box.id) for _ in range(3)]
    (tmp_path / ingest.USAGE_FILE).write_bytes(b"\n".join(lines) + b"\n")
    assert ingest.collect(tmp_path) == 0  # moved aside: a line being written goes into it
    assert not (tmp_path / ingest.USAGE_FILE).exists()
    taken = tmp_path / f"{ingest.USAGE_FILE}.collecting"
    assert ingest.collect(tmp_path) == 0  # written a moment ago: not yet
    os.utime(taken, (time.time() - 5, time.time() - 5))
    assert ingest.collect(tmp_path) == 3
    assert not taken.exists()
    assert ingest.ingest(lines) == 0  # a cocoond that stopped before removing the file reads it again
    assert UsageRecord.objects.count() == 3


def test_records_are_priced_and_attributed_and_an_agent_of_another_sandbox_is_not_believed():
    mine, other = sandbox("mine"), sandbox("other")
    schedule = Schedule.objects.create(name="nightly", cron="0 3 * * *", template={})
    task = Task.objects.create(title="t", prompt="p", workflow=[], schedule=schedule, sandbox_id=mine.id)
    worker = Agent.objects.create(sandbox=mine, profile="claude-code", task_id=task.id)
    victim = Agent.objects.create(sandbox=other, profile="claude-code")
    assert (
        ingest.ingest([line(mine.id, worker.id), line(mine.id, victim.id), line(mine.id, model="x-unknown")])
        == 3
    )
    own = UsageRecord.objects.get(agent_id=worker.id)
    assert (own.task_id, own.schedule_id, own.priced) == (task.id, schedule.id, True)
    # claude-sonnet-4*: 3 in, 15 out, 3.75 cache write, 0.30 cache read per million tokens
    assert own.cost == Decimal("0.003") + Decimal("0.003") + Decimal("0.001125") + Decimal("0.0012")
    forged = UsageRecord.objects.exclude(pk=own.pk).filter(model="claude-sonnet-4-5").get()
    assert (forged.sandbox_id, forged.agent_id) == (mine.id, "")  # counted for its own sandbox only
    unpriced = UsageRecord.objects.get(model="x-unknown")
    assert (unpriced.priced, unpriced.cost) == (False, 0)


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"id": "../../etc", "sandboxId": "sb_a", "at": 1}).encode(),
        json.dumps({"id": "a" * 32, "sandboxId": "sb_a'; drop", "at": 1}).encode(),
        json.dumps({"id": "a" * 32, "sandboxId": "sb_a", "agentId": "root", "at": 1}).encode(),
        json.dumps({"id": "a" * 32, "sandboxId": "sb_a", "at": "yesterday"}).encode(),
        json.dumps({"id": "a" * 32, "sandboxId": "sb_a", "at": 1e300}).encode(),
    ],
)
def test_a_line_that_is_no_record_is_skipped(raw):
    assert ingest.ingest([raw]) == 0


def test_hostile_fields_are_bounded():
    box = sandbox("s")
    raw = line(box.id, model="m" * 5000 + "\x1b[31m", inputTokens=-1, outputTokens=10**15, status=70000)
    assert ingest.ingest([raw]) == 1
    record = UsageRecord.objects.get()
    assert len(record.model) == 200
    assert "\x1b" not in record.model
    assert (record.input_tokens, record.output_tokens, record.status) == (0, 0, 0)


def test_summary_and_pages():
    a, b = sandbox("a"), sandbox("b")
    worker = Agent.objects.create(sandbox=a, profile="claude-code")
    ingest.ingest([line(a.id, worker.id) for _ in range(5)] + [line(b.id, model="gpt-5", provider="openai")])
    summary = call("usage.summary", {"groupBy": "agent"}, AGENT_ACTOR)
    assert summary["currency"] == "USD"
    assert summary["total"]["requests"] == 6
    assert summary["total"]["inputTokens"] == 6000
    by_agent = {group["key"]: group for group in summary["groups"]}
    assert by_agent[worker.id]["requests"] == 5
    assert by_agent[""]["requests"] == 1
    assert by_agent[worker.id]["cost"] == pytest.approx(5 * 0.008325)
    days = call("usage.summary", {"groupBy": "day", "sandboxId": b.id})["groups"]
    assert len(days) == 1
    assert days[0]["requests"] == 1
    assert [group["key"] for group in call("usage.summary", {"groupBy": "model"})["groups"]] == [
        "claude-sonnet-4-5",
        "gpt-5",
    ]

    seen, cursor = [], None
    while True:
        page = call("usage.records", {"limit": 2} | ({"cursor": cursor} if cursor else {}), AGENT_ACTOR)
        seen += [record["id"] for record in page["records"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 6
    with pytest.raises(InvalidParams):
        call("usage.records", {"cursor": "garbage|x"})
    with pytest.raises(CocoonError) as gone:
        call("usage.records", {"cursor": "0" * 32})
    assert gone.value.code == "not_found"


def test_a_streams_record_at_its_start_is_replaced_by_the_one_at_its_end_never_the_other_way():
    box = sandbox("s")
    start = line(box.id, outputTokens=1, complete=False, final=False)
    end = json.dumps(
        json.loads(start) | {"outputTokens": 900, "final": True}
    ).encode()  # cut short: not complete
    assert ingest.ingest([start]) == 1  # a proxy killed mid-stream leaves this
    assert (UsageRecord.objects.get().output_tokens, UsageRecord.objects.get().complete) == (1, False)
    assert ingest.ingest([end]) == 0
    assert (UsageRecord.objects.get().output_tokens, UsageRecord.objects.get().final) == (900, True)
    assert ingest.ingest([start]) == 0  # its file read again after a restart
    assert UsageRecord.objects.get().output_tokens == 900
    assert ingest.ingest([start, end]) == 0
    assert UsageRecord.objects.count() == 1


# -- budgets -------------------------------------------------------------------------------------------

COST_PER_LINE = Decimal("0.008325")  # line(): claude-sonnet-4-5, 1000 in, 200 out, 300 + 4000 cache


@pytest.fixture
def budgeted(transactional_db):
    from attention import feed  # noqa: F401 - its observers make the budget's attention items

    box = sandbox("s")
    return Agent.objects.create(
        sandbox=box, profile="claude-code", budget={"cost": float(COST_PER_LINE * 10)}
    )


def test_an_agent_budget_warns_then_is_spent_and_its_requests_are_refused_until_it_is_raised(budgeted):
    from attention.models import Item
    from usage import budgets

    agent = budgeted
    ingest.ingest([line(agent.sandbox_id, agent.id) for _ in range(8)])
    [state] = call("usage.budgets", {}, AGENT_ACTOR)
    assert (state["scope"], state["subject"], state["state"]) == ("agent", agent.id, "warned")  # 80 % spent
    assert budgets.refusals()["agents"] == {}
    [item] = Item.objects.filter(kind="budget", agent_id=agent.id)
    assert item.state == "open"

    ingest.ingest([line(agent.sandbox_id, agent.id) for _ in range(2)])
    assert call("usage.budgets", {"state": "exceeded"})[0]["spentCost"] == pytest.approx(
        float(COST_PER_LINE * 10)
    )
    refused = budgets.refusals()["agents"][agent.id]
    assert f"the budget of agent {agent.id} is spent" in refused
    assert "0.08 USD of 0.08 USD" in refused
    # A request of its sandbox that names no agent (the placeholder without its suffix) is refused too.
    assert budgets.refusals()["unnamed"] == {agent.sandbox_id: refused}
    # The published policy carries it (what the proxy refuses by).
    from egress import policy

    assert json.loads((policy.egress_dir() / "policy.json").read_text())["refuse"]["agents"] == {
        agent.id: refused
    }
    item.refresh_from_db()
    assert (item.state, item.params["state"]) == ("open", "exceeded")

    with pytest.raises(CocoonError):  # raising a budget is an admin's
        call("usage.set_budget", {"agentId": agent.id, "budget": {"cost": 1}}, AGENT_ACTOR)
    raised = call("usage.set_budget", {"agentId": agent.id, "budget": {"cost": 1}})
    assert raised["state"] == "ok"
    assert budgets.refusals()["agents"] == {}
    assert json.loads((policy.egress_dir() / "policy.json").read_text())["refuse"]["agents"] == {}
    item.refresh_from_db()
    assert item.state == "closed"

    ingest.ingest([line(agent.sandbox_id, agent.id) for _ in range(200)])  # spent again, then removed
    assert budgets.refusals()["agents"]
    assert call("usage.set_budget", {"agentId": agent.id, "budget": None}) is None
    assert budgets.refusals()["agents"] == {}
    assert not Item.objects.filter(kind="budget", agent_id=agent.id, state="open").exists()


def test_a_task_budget_refuses_every_agent_of_the_task_and_a_token_budget_counts_tokens(transactional_db):
    from usage import budgets

    box = sandbox("s")
    task = Task.objects.create(
        title="t", prompt="p", workflow=[], sandbox_id=box.id, budget={"tokens": 10_000}
    )
    first = Agent.objects.create(sandbox=box, profile="claude-code", task_id=task.id)
    second = Agent.objects.create(sandbox=box, profile="codex", task_id=task.id)
    bystander = Agent.objects.create(sandbox=box, profile="shell")
    ingest.ingest([line(box.id, first.id), line(box.id, second.id)])  # 2 x 5,500 tokens
    Task.objects.filter(pk=task.pk).update(status="done")
    assert budgets.refusals()["agents"] == {}  # a task that is no longer open refuses nothing
    Task.objects.filter(pk=task.pk).update(status="running", own_sandbox=False)
    assert budgets.refusals()["sandboxes"] == {}  # a sandbox it shares: its agents only
    Task.objects.filter(pk=task.pk).update(own_sandbox=True)
    assert set(budgets.refusals()["sandboxes"]) == {box.id}  # its own: the steps still to come too
    refused = budgets.refusals()["agents"]
    assert set(refused) == {first.id, second.id}
    assert bystander.id not in refused
    assert "11000 tokens of 10000 tokens" in refused[first.id]


def test_todays_cap_refuses_everyone(transactional_db):
    from cocoon import config
    from usage import budgets

    config.update_settings({"usage": {"dailyCap": 0.01}}, actor=SYSTEM_ACTOR)
    box = sandbox("s")
    ingest.ingest([line(box.id)])
    assert budgets.refusals()["all"] == ""
    ingest.ingest([line(box.id)])
    assert "today's cap of all agents is spent" in budgets.refusals()["all"]
    config.update_settings({"usage": {"dailyCap": 1}}, actor=SYSTEM_ACTOR)  # raised: the next tick lifts it
    assert ingest.collect() == 0
    assert budgets.refusals()["all"] == ""
    config.update_settings({"usage": {"dailyCap": 0.01}}, actor=SYSTEM_ACTOR)
    ingest.collect()
    assert budgets.refusals()["all"]
    config.update_settings({"usage": {"dailyCap": 0}}, actor=SYSTEM_ACTOR)
    ingest.collect()
    assert budgets.refusals()["all"] == ""


def test_a_projects_daily_cap_refuses_its_own_sandboxes_only_and_its_records_stay_its_own(transactional_db):
    from cocoon import tenancy
    from usage import budgets
    from usage import services as usage_services

    tenancy.create_project("capped", "Capped", {"dailyCost": 0.01})
    tenancy.create_project("free", "Free")
    capped = Sandbox.objects.create(
        name="c", image="i", network="egress", cpus=1, memory_mb=64, pids=16, project_id="capped"
    )
    sibling = Sandbox.objects.create(
        name="d", image="i", network="egress", cpus=1, memory_mb=64, pids=16, project_id="capped"
    )
    free = Sandbox.objects.create(
        name="f", image="i", network="egress", cpus=1, memory_mb=64, pids=16, project_id="free"
    )
    ingest.ingest([line(capped.id), line(free.id), line(free.id), line(free.id)])
    assert budgets.refusals()["sandboxes"] == {}  # its one request is below the cap; the others' count not
    ingest.ingest([line(capped.id)])
    refused = budgets.refusals()["sandboxes"]
    assert set(refused) == {capped.id, sibling.id}
    assert "today's cap of project capped is spent" in refused[capped.id]
    assert budgets.refusals()["all"] == ""
    # Its records stay its own after the sandbox is gone.
    capped_id = capped.id
    capped.delete()
    member = Actor(token_id="t", name="t", scope=TokenScope.AGENT, project="capped")
    other = Actor(token_id="u", name="u", scope=TokenScope.AGENT, project="free")
    assert {record.sandbox_id for record in usage_services.matching({}, member)} == {capped_id}
    assert capped_id not in {record.sandbox_id for record in usage_services.matching({}, other)}
    tenancy.update_project("capped", quotas={"dailyCost": 100})  # raised: the next tick lifts it
    ingest.collect()
    assert budgets.refusals()["sandboxes"] == {}


def test_a_task_budget_that_says_stop_fails_the_task_with_its_reason(transactional_db):
    from scheduling.reasons import render_closing_reason

    box = sandbox("s")
    task = Task.objects.create(
        title="t",
        prompt="p",
        workflow=[{"profile": "claude-code"}],
        steps=[{"status": "running"}],
        status="running",
        sandbox_id=box.id,
        budget={"tokens": 10_000, "onSpent": "stop"},
    )
    worker = Agent.objects.create(sandbox=box, profile="claude-code", task_id=task.id)
    Task.objects.filter(pk=task.pk).update(steps=[{"status": "running", "agentId": worker.id}])
    ingest.ingest([line(box.id, worker.id) for _ in range(2)])
    task.refresh_from_db()
    assert task.status == "failed"
    assert render_closing_reason(task.reason, "en") == "Its budget is spent: 11000 tokens of 10000 tokens."


def test_a_sandbox_budget_refuses_the_whole_sandbox_until_it_is_raised_or_removed(transactional_db):
    from usage import budgets

    box, other = sandbox("s"), sandbox("other")
    Sandbox.objects.filter(pk=box.pk).update(budget={"tokens": 10_000})
    named = Agent.objects.create(sandbox=box, profile="claude-code")
    ingest.ingest([line(box.id, named.id), line(box.id), line(other.id)])  # 2 x 5,500 tokens in box
    [state] = call("usage.budgets", {"state": "exceeded"}, AGENT_ACTOR)
    assert (state["scope"], state["subject"], state["spentTokens"]) == ("sandbox", box.id, 11_000)
    refused = budgets.refusals()
    assert set(refused["sandboxes"]) == {box.id}  # every request of it, named or not; not the other's
    assert (
        f"the budget of sandbox {box.id} is spent (11000 tokens of 10000 tokens)"
        in refused["sandboxes"][box.id]
    )
    assert call("sandbox.get", {"sandboxId": box.id})["budget"] == {"tokens": 10_000}

    raised = call("usage.set_budget", {"sandboxId": box.id, "budget": {"tokens": 20_000}})
    assert (raised["scope"], raised["state"]) == ("sandbox", "ok")
    assert budgets.refusals()["sandboxes"] == {}
    ingest.ingest([line(box.id) for _ in range(2)])
    assert set(budgets.refusals()["sandboxes"]) == {box.id}
    assert call("usage.set_budget", {"sandboxId": box.id, "budget": None}) is None
    assert budgets.refusals()["sandboxes"] == {}
    assert Sandbox.objects.get(pk=box.pk).budget is None


@pytest.mark.parametrize(
    "params",
    [
        {"budget": {"cost": 1}},  # whose?
        {"agentId": "ag_x", "sandboxId": "sb_x", "budget": {"cost": 1}},  # one at a time
        {"sandboxId": "../x", "budget": {"cost": 1}},
        {"sandboxId": "sb_x", "budget": {"cost": 0}},
    ],
)
def test_set_budget_names_exactly_one_owner(params):
    with pytest.raises(InvalidParams):
        call("usage.set_budget", params)


def test_set_budget_of_an_unknown_sandbox_is_not_found():
    with pytest.raises(CocoonError) as raised:
        call("usage.set_budget", {"sandboxId": "sb_nosuch", "budget": {"cost": 1}})
    assert raised.value.code == "not_found"


def test_a_task_whose_request_the_proxy_refused_fails_naming_the_spent_budget(transactional_db):
    from scheduling.reasons import render_closing_reason

    box = sandbox("s")
    Sandbox.objects.filter(pk=box.pk).update(budget={"tokens": 5_000})
    task = Task.objects.create(
        title="t", prompt="p", workflow=[{"profile": "claude-code"}], status="running", sandbox_id=box.id
    )
    worker = Agent.objects.create(sandbox=box, profile="claude-code", task_id=task.id)
    Task.objects.filter(pk=task.pk).update(steps=[{"status": "running", "agentId": worker.id}])
    ingest.ingest([line(box.id, worker.id)])  # spent: the proxy refuses what comes next
    task.refresh_from_db()
    assert task.status == "running"  # refuse (the default) fails nothing by itself
    nothing = dict.fromkeys(("inputTokens", "outputTokens", "cacheWriteTokens", "cacheReadTokens"), 0)
    refused = line(box.id, worker.id, status=403, refused=True, model="", stream=False, **nothing)
    ingest.ingest([refused])
    task.refresh_from_db()
    assert task.status == "failed"
    assert render_closing_reason(task.reason, "en") == (
        f"The budget of its sandbox {box.id} is spent: 5500 tokens of 5000 tokens."
    )
    [record] = call("usage.records", {"taskId": task.id, "limit": 1})["records"]
    assert (record["refused"], record["status"]) == (True, 403)


def test_a_step_that_failed_while_a_budget_covering_its_task_is_spent_is_said_to_have_failed_for_it(
    transactional_db,
):
    from cocoon import config
    from scheduling import runner
    from scheduling.reasons import closing_reason, render_closing_reason

    box = sandbox("s")
    task = Task.objects.create(title="t", prompt="p", workflow=[], status="running", sandbox_id=box.id)
    worker = Agent.objects.create(sandbox=box, profile="claude-code", task_id=task.id, budget={"tokens": 1})
    no_report = closing_reason("no_report", path=".cocoon/report/x.json")
    assert runner.explained(task, no_report) == no_report  # nothing spent: the step's own reason
    ingest.ingest([line(box.id, worker.id)])
    explained = render_closing_reason(runner.explained(task, no_report), "en")
    assert explained == f"The budget of its agent {worker.id} is spent: 5500 tokens of 1 tokens."
    gone = closing_reason("sandbox_gone", sandbox=box.id)
    assert runner.explained(task, gone) == gone  # not a step's failure: no budget explains it
    config.update_settings({"usage": {"dailyCap": 0.000001}}, actor=SYSTEM_ACTOR)
    Agent.objects.filter(pk=worker.pk).update(budget=None)
    from usage.models import BudgetState

    BudgetState.objects.filter(scope="agent").delete()
    ingest.ingest([line(sandbox("t").id)])
    assert render_closing_reason(runner.explained(task, no_report), "en").startswith(
        "Today's cap of all agents is spent:"
    )
