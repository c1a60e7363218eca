"""The real Claude Code CLI from the toolbox, against a local stand-in for the Anthropic API."""

import pytest

from tests.llm_standin import AnthropicStandIn, OpenAIStandIn


@pytest.fixture(scope="module")
def toolbox_cocoond(cocoond, sandbox_image):
    """The shared cocoond with the toolbox installed (a copy of the cached npm staging folder)."""
    if not cocoond.call("toolbox.status")["installed"]:
        with cocoond.ws() as ws:
            ws.call("events.subscribe", {"types": ["toolbox.install"]})
            cocoond.call("toolbox.install")
            status = None
            while status not in {"done", "failed"}:
                status = ws.next_event(timeout=900)["event"]["data"]["status"]
        assert status == "done"
    return cocoond


@pytest.mark.e2e
def test_claude_code_reports_working_then_done_through_its_hooks(toolbox_cocoond, docker_client):
    cocoond = toolbox_cocoond
    gateway = docker_client.networks.get(f"{cocoond.instance}-open").attrs["IPAM"]["Config"][0]["Gateway"]
    llm = AnthropicStandIn(gateway)
    cocoond.call("secrets.set", {"name": "ANTHROPIC_API_KEY", "value": "sk-ant-standin-0123456789abcdefghij"})
    sandbox = cocoond.call("sandbox.create", {"network": "open"})
    try:
        agent = cocoond.call(
            "agent.spawn",
            {
                "sandboxId": sandbox["id"],
                "profile": "claude-code",
                "prompt": "Say hello.",
                "env": {"ANTHROPIC_BASE_URL": llm.url},
            },
        )
        done = cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["done"], "timeoutS": 90})
        assert done["statusSource"] == "hook"
        assert any(request["path"].startswith("/v1/messages") for request in llm.requests)
        keys = {
            request["headers"].get("x-api-key") or request["headers"].get("X-Api-Key")
            for request in llm.requests
        }
        assert "sk-ant-standin-0123456789abcdefghij" in keys
        screen = cocoond.call("agent.read", {"agentId": agent["id"]})["screen"]
        assert "Hello from the stand-in." in screen
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        cocoond.call("secrets.delete", {"name": "ANTHROPIC_API_KEY"})
        llm.close()


@pytest.mark.e2e
def test_claude_code_asks_permission_is_blocked_and_goes_on_when_approved(toolbox_cocoond, docker_client):
    cocoond = toolbox_cocoond
    gateway = docker_client.networks.get(f"{cocoond.instance}-open").attrs["IPAM"]["Config"][0]["Gateway"]
    llm = AnthropicStandIn(gateway, reply="The command ran.", command="echo approved > /workspace/ran.txt")
    cocoond.call("secrets.set", {"name": "ANTHROPIC_API_KEY", "value": "sk-ant-standin-0123456789abcdefghij"})
    sandbox = cocoond.call("sandbox.create", {"network": "open"})
    try:
        agent = cocoond.call(
            "agent.spawn",
            {
                "sandboxId": sandbox["id"],
                "profile": "claude-code",
                "prompt": "Please run the command.",
                "env": {"ANTHROPIC_BASE_URL": llm.url},
            },
        )
        response = cocoond.post("agent.wait", {"agentId": agent["id"], "until": ["blocked"], "timeoutS": 60})
        screen = cocoond.call("agent.read", {"agentId": agent["id"]})["screen"]
        assert response.status_code == 200, (response.text, screen, [r["path"] for r in llm.requests])
        blocked = response.json()["result"]
        assert blocked["statusSource"] == "hook"
        exists = cocoond.call(
            "sandbox.exec", {"sandboxId": sandbox["id"], "command": ["test", "-e", "ran.txt"]}
        )
        assert exists["exitCode"] == 1  # nothing ran before the approval
        cocoond.call(
            "agent.send_keys", {"agentId": agent["id"], "keys": ["Enter"]}
        )  # "1. Yes" is preselected
        done = cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["done"], "timeoutS": 90})
        assert done["statusSource"] == "hook"
        ran = cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["cat", "ran.txt"]})
        assert ran["stdout"] == "approved\n"
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        cocoond.call("secrets.delete", {"name": "ANTHROPIC_API_KEY"})
        llm.close()


@pytest.mark.e2e
def test_codex_reports_done_through_notify(toolbox_cocoond, docker_client):
    cocoond = toolbox_cocoond
    gateway = docker_client.networks.get(f"{cocoond.instance}-open").attrs["IPAM"]["Config"][0]["Gateway"]
    llm = OpenAIStandIn(gateway)
    cocoond.call("secrets.set", {"name": "OPENAI_API_KEY", "value": "sk-openai-standin-0123456789"})
    sandbox = cocoond.call("sandbox.create", {"network": "open"})
    try:
        agent = cocoond.call(
            "agent.spawn",
            {
                "sandboxId": sandbox["id"],
                "profile": "codex",
                "prompt": "Say hello.",
                "env": {"OPENAI_BASE_URL": llm.url},
            },
        )
        response = cocoond.post("agent.wait", {"agentId": agent["id"], "until": ["done"], "timeoutS": 60})
        screen = cocoond.call("agent.read", {"agentId": agent["id"]})["screen"]
        assert response.status_code == 200, (response.text, screen, [r["path"] for r in llm.requests])
        assert response.json()["result"]["statusSource"] == "hook"
        assert any(request["path"].endswith("/responses") for request in llm.requests)
        assert "Hello from the OpenAI stand-in." in screen
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        cocoond.call("secrets.delete", {"name": "OPENAI_API_KEY"})
        llm.close()
