"""RPC methods of usage: what agents' LLM requests used and cost, as the credential proxy metered them."""

from typing import Any

from cocoon import config, tenancy
from cocoon.registry import Call, registry
from cocoon.schema import BUDGET, STRING, TIMESTAMP, array, enum, integer, nullable, obj, string
from usage import budgets, services
from usage.models import BudgetState
from usage.schemas import BUDGET_STATE, RECORD, SUMS, serialize_group, serialize_record

ID = string(maxLength=40)
AGENT_ID = string(pattern="^ag_[a-z0-9]{1,37}$")
TASK_ID = string(pattern="^tk_[a-z0-9]{1,37}$")
SANDBOX_ID = string(pattern="^sb_[a-z0-9]{1,37}$")
FILTERS = {
    "sandboxId": ID,
    "agentId": ID,
    "taskId": ID,
    "scheduleId": ID,
    "from": TIMESTAMP,
    "to": TIMESTAMP,
}


@registry.method(
    "usage.records",
    reads=True,
    description="LLM requests of agents as the credential proxy metered them (model, tokens read from the "
    "provider's answer, cost by settings usage.prices), newest first; filters sandboxId, agentId, taskId, "
    "scheduleId, from, to; pass next as cursor for the page after.",
    params=obj(
        {**FILTERS, "limit": integer(minimum=1, maximum=1000), "cursor": string(pattern="^[0-9a-f]{32}$")}
    ),
    result=obj({"records": array(RECORD), "next": nullable(STRING)}),
    agent_side=True,
)
def usage_records(call: Call) -> dict[str, Any]:
    records, cursor = services.page(call.params, call.params.get("limit", 100), call.actor)
    return {"records": [serialize_record(record) for record in records], "next": cursor}


@registry.method(
    "usage.summary",
    reads=True,
    description="Requests, tokens and cost summed per agent, sandbox, task, schedule, model, provider or day "
    "(most cost first; days in order), and over all; the same filters as usage.records.",
    params=obj({**FILTERS, "groupBy": enum(*services.GROUPS)}, required=("groupBy",)),
    result=obj({"currency": STRING, "groups": array(SUMS), "total": SUMS}),
    agent_side=True,
)
def usage_summary(call: Call) -> dict[str, Any]:
    groups, total = services.summary(call.params, call.params["groupBy"], call.actor)
    return {
        "currency": config.get_settings()["usage"]["currency"],
        "groups": [serialize_group(group) for group in groups],
        "total": serialize_group(total),
    }


@registry.method(
    "usage.set_budget",
    description="Set an agent's, a task's or a sandbox's budget ({cost?, tokens?, onSpent?}; null removes "
    "it) and judge it at once: raised past what was spent, its requests pass the credential proxy again "
    "as soon as it has loaded the new policy (this call waits for that).",
    params=obj(
        {"agentId": AGENT_ID, "taskId": TASK_ID, "sandboxId": SANDBOX_ID, "budget": nullable(BUDGET)},
        required=("budget",),
        oneOf=[{"required": [name]} for name in ("agentId", "taskId", "sandboxId")],  # just one of them
    ),
    result=nullable(BUDGET_STATE),
    admin=True,
)
def usage_set_budget(call: Call) -> dict[str, Any] | None:
    params = call.params
    state = budgets.set_budget(
        actor=call.actor,
        budget=params["budget"],
        agent_id=params.get("agentId", ""),
        task_id=params.get("taskId", ""),
        sandbox_id=params.get("sandboxId", ""),
    )
    return None if state is None else budgets.serialize_state(state)


@registry.method(
    "usage.budgets",
    reads=True,
    description="Every budget as last judged after an ingest: its scope (agent, task, sandbox, day), what it "
    "allows, what was spent, and its state (ok; warned: settings usage.notifyAt of it spent; exceeded: "
    "requests refused).",
    params=obj({"state": enum("ok", "warned", "exceeded")}),
    result=array(BUDGET_STATE),
    agent_side=True,
)
def usage_budgets(call: Call) -> list[dict[str, Any]]:
    states = BudgetState.objects.filter(tenancy.by_sandbox(call.actor)).order_by("scope", "subject")
    if state := call.params.get("state"):
        states = states.filter(state=state)
    return [budgets.serialize_state(state) for state in states]
