"""Usage metered for real: the real Claude Code and Codex CLIs in sandboxes talk through the credential
proxy to local stand-ins of their APIs, which report realistic usage (SSE); cocoon's records match what
the stand-ins reported, token for token, attributed to the agent."""

import threading
from collections import Counter

import pytest

from tests.conftest import wait_until
from tests.llm_standin import AnthropicStandIn, OpenAIStandIn
from tests.test_agents_e2e import stage, wait  # noqa: F401 - stage is a fixture

pytestmark = pytest.mark.e2e

CLIS = {
    "claude-code": (AnthropicStandIn, "ANTHROPIC_API_KEY", {"kind": "anthropic", "auth": "x-api-key"}),
    "codex": (OpenAIStandIn, "OPENAI_API_KEY", {"kind": "openai", "auth": "bearer"}),
}
ANSWERS = ("/messages", "/responses")  # where the answers with usage come from (not count_tokens)


@pytest.fixture(params=CLIS)
def cli(request, toolbox_cocoond, stage):  # noqa: F811
    """A CLI's profile, its stand-in LLM and an open sandbox, and a provider routing to the stand-in
    through the credential proxy (removed after)."""
    profile = request.param
    standin, secret, provider = CLIS[profile]
    llm, sandbox = stage(standin, secret)
    name = f"usage-{profile}"
    toolbox_cocoond.call(
        "settings.update", {"providers": {name: provider | {"baseUrl": llm.url, "secret": secret}}}
    )
    yield profile, llm, sandbox, name
    toolbox_cocoond.call("settings.reset", {"keys": [f"providers.{name}"]})


def tokens(entry: dict) -> tuple[int, int, int, int]:
    return (entry["inputTokens"], entry["outputTokens"], entry["cacheWriteTokens"], entry["cacheReadTokens"])


def test_the_records_match_what_the_provider_reported_token_for_token(toolbox_cocoond, cli):
    cocoond = toolbox_cocoond
    profile, llm, sandbox, name = cli
    agent = cocoond.call(
        "agent.spawn",
        {"sandboxId": sandbox["id"], "profile": profile, "prompt": "Say hello.", "providers": [name]},
    )
    wait(cocoond, agent, "done", llm)
    assert llm.usage, "the CLI asked the stand-in nothing"

    def answered() -> list[dict]:
        records = cocoond.call("usage.records", {"agentId": agent["id"], "limit": 1000})["records"]
        found = [record for record in records if record["path"].endswith(ANSWERS)]
        return found if len(found) >= len(llm.usage) else []

    records = wait_until(answered, timeout=30)
    assert Counter(map(tokens, records)) == Counter(map(tokens, llm.usage))
    assert {(record["sandboxId"], record["provider"], record["status"]) for record in records} == {
        (sandbox["id"], name, 200)
    }
    assert all(record["stream"] and record["complete"] and record["priced"] for record in records)
    total = cocoond.call("usage.summary", {"groupBy": "agent", "agentId": agent["id"]})["total"]
    assert total["outputTokens"] == sum(used["outputTokens"] for used in llm.usage)


def test_a_cli_past_its_budget_is_refused_by_the_proxy_and_shows_why(toolbox_cocoond, cli):
    cocoond = toolbox_cocoond
    profile, llm, sandbox, name = cli
    params = {"sandboxId": sandbox["id"], "profile": profile, "prompt": "Say hello.", "providers": [name]}
    agent = cocoond.call("agent.spawn", params | {"budget": {"tokens": 1}})  # spent by the first answer
    wait(cocoond, agent, "done", llm)

    def spent() -> bool:
        return agent["id"] in {
            state["subject"] for state in cocoond.call("usage.budgets", {"state": "exceeded"})
        }

    wait_until(spent, timeout=30)
    asked = len(llm.requests)
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": "Say more."})

    def shown() -> str:
        screen = cocoond.call("agent.read", {"agentId": agent["id"]})["screen"]
        return screen if "budget of agent" in screen else ""

    screen = wait_until(shown, timeout=60)
    assert agent["id"] in screen.replace("\n", "")
    assert len(llm.requests) == asked  # nothing more reached the provider
    items = cocoond.call("attention.list", {"sandboxId": sandbox["id"]})
    assert "budget" in {item["kind"] for item in items}


def test_a_task_cut_off_by_its_budget_mid_run_fails_naming_it_and_its_cli_shows_why(toolbox_cocoond, stage):  # noqa: F811
    """Claude Code's first answer (held after its message_start until the budget is judged spent and
    the proxy has loaded that) is a tool call; the CLI's next request, with the tool's result, is
    refused by the proxy: the CLI shows the budget's message, and the task fails naming its budget."""
    cocoond = toolbox_cocoond
    hold = threading.Event()
    read = {"file_path": "/workspace/.git/HEAD"}  # a tool Claude Code runs without asking
    llm, sandbox = stage(AnthropicStandIn, "ANTHROPIC_API_KEY", tool="Read", tool_input=read, hold=hold)
    provider = {"kind": "anthropic", "auth": "x-api-key", "baseUrl": llm.url, "secret": "ANTHROPIC_API_KEY"}
    cocoond.call("settings.update", {"providers": {"budgeted": provider}})
    try:
        step = {"profile": "claude-code", "prompt": "{{prompt}}", "providers": ["budgeted"], "timeoutS": 180}
        task = cocoond.call(
            "task.create",
            {
                "prompt": "Run a search.",
                "sandboxId": sandbox["id"],
                "workflow": [step],
                "budget": {"tokens": 1},
            },
        )

        def spent() -> bool:
            states = cocoond.call("usage.budgets", {"state": "exceeded"})
            return task["id"] in {state["subject"] for state in states}

        wait_until(spent, timeout=120, interval=0.5)
        status = cocoond.call("egress.status", {})
        wait_until(
            lambda: cocoond.call("egress.status", {})["acknowledgedVersion"] >= status["policyVersion"]
        )
        asked = len(llm.requests)
        agent_id = cocoond.call("task.get", {"taskId": task["id"]})["steps"][0]["agentId"]
        hold.set()  # the tool call goes out; the CLI runs it and asks again

        screens = []

        def ended() -> dict | None:  # the screen is looked at until the failed task kills the agent
            screens.append(cocoond.call("agent.read", {"agentId": agent_id})["screen"])
            found = cocoond.call("task.get", {"taskId": task["id"]})
            return found if found["status"] not in {"queued", "running"} else None

        failed = wait_until(ended, timeout=120, interval=0.1)
        assert (failed["status"], failed["reasonCode"]) == ("failed", "budget_spent"), failed
        assert failed["reason"].startswith("Its budget is spent: "), failed["reason"]
        shown = "".join(screen.replace("\n", "") for screen in screens)
        offered = {
            tool.get("name") for request in llm.requests for tool in request["body"].get("tools") or []
        }
        assert f"the budget of task {task['id']} is spent" in shown, (screens[-1], offered)
        assert len(llm.requests) == asked  # the refused request never reached the provider

        def refused() -> list[dict]:  # the proxy's record of it (whichever came first, it or the CLI's end)
            records = cocoond.call("usage.records", {"taskId": task["id"], "limit": 1000})["records"]
            return [record for record in records if record["refused"]]

        assert {record["status"] for record in wait_until(refused, timeout=30)} == {403}
        items = cocoond.call("attention.list", {"sandboxId": sandbox["id"]})
        assert {"budget", "task_failed"} <= {item["kind"] for item in items}
    finally:
        hold.set()
        cocoond.call("settings.reset", {"keys": ["providers.budgeted"]})
