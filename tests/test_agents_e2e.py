"""The real Claude Code and Codex CLIs from the toolbox, against local stand-ins for their LLM APIs."""

import json
import shlex

import pytest

from agents.models import AgentProfile
from agents.profiles import BUILTIN_PROFILES, resume_command
from tests.conftest import open_to
from tests.llm_standin import AnthropicStandIn, OpenAIStandIn


@pytest.fixture
def stage(toolbox_cocoond, docker_client, sandbox_image):
    """An open sandbox, a stand-in LLM on its network's gateway and the API key secret; all removed after.
    The CLIs given ANTHROPIC_BASE_URL / OPENAI_BASE_URL dial the stand-in themselves: a host address,
    which the open sandboxes' fence lets through only as allowed."""
    cocoond = toolbox_cocoond
    gateway = docker_client.networks.get(f"{cocoond.instance}-outbound").attrs["IPAM"]["Config"][0]["Gateway"]
    made = []

    def make(standin, secret, **options):
        llm = standin(gateway, **options)
        cocoond.call(
            "secrets.set", {"name": secret, "value": f"{secret.lower()}-standin-0123456789abcdefghij"}
        )
        sandbox = cocoond.call("sandbox.create", {"network": "open", "image": sandbox_image})
        made.append((llm, secret, sandbox))
        return llm, sandbox

    with open_to(cocoond, gateway):
        yield make
    for llm, secret, sandbox in made:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        cocoond.call("secrets.delete", {"name": secret})
        llm.close()


def spawn(cocoond, sandbox, profile, prompt, **env):
    return cocoond.call(
        "agent.spawn", {"sandboxId": sandbox["id"], "profile": profile, "prompt": prompt, "env": env}
    )


def sandbox_sh(cocoond, sandbox, script):
    return cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["sh", "-c", script]})


def resumes_its_session(cocoond, sandbox, profile, session, llm, env, shown):
    """A profile that runs the built-in's resume command for this session (as a resume after a restart
    would) shows the conversation the first agent had."""
    built_in = AgentProfile(**BUILTIN_PROFILES[profile])
    command = resume_command(built_in, session)
    assert session in command
    name = f"{profile}-resumed"
    fields = {"command": command, "hooks": True, "secrets": built_in.secrets, "env": built_in.env}
    cocoond.call("profile.create", {"name": name, **fields})
    try:
        agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": name, "env": env})
        response = cocoond.post(
            "agent.wait", {"agentId": agent["id"], "until": ["idle", "done"], "timeoutS": 60}
        )
        screen = cocoond.call("agent.read", {"agentId": agent["id"]})["screen"]
        assert response.status_code == 200, (response.text, screen)
        assert shown in screen, screen
        cocoond.call("agent.kill", {"agentId": agent["id"]})
    finally:
        cocoond.post("profile.delete", {"name": name})


def wait(cocoond, agent, status, llm):
    response = cocoond.post("agent.wait", {"agentId": agent["id"], "until": [status], "timeoutS": 90})
    screen = cocoond.call("agent.read", {"agentId": agent["id"]})["screen"]
    assert response.status_code == 200, (response.text, screen, [request["path"] for request in llm.requests])
    return response.json()["result"], screen


def says_hello_through_the_proxy(cocoond, sandbox, llm, real_key: str) -> None:
    """Claude Code, given the provider "company", answers through the credential proxy, which alone
    sends the real key, and reports done through its hooks."""
    params = {"sandboxId": sandbox["id"], "profile": "claude-code", "prompt": "Say hello."}
    agent = cocoond.call("agent.spawn", params | {"providers": ["company"]})
    done, screen = wait(cocoond, agent, "done", llm)
    assert done["statusSource"] == "hook"
    assert "Hello from the stand-in." in screen
    keys = {
        request["headers"].get("x-api-key") or request["headers"].get("X-Api-Key") for request in llm.requests
    }
    assert keys == {real_key}


@pytest.mark.e2e
def test_claude_code_reports_working_then_done_through_its_hooks(toolbox_cocoond, stage):
    llm, sandbox = stage(AnthropicStandIn, "ANTHROPIC_API_KEY")
    agent = spawn(toolbox_cocoond, sandbox, "claude-code", "Say hello.", ANTHROPIC_BASE_URL=llm.url)
    done, screen = wait(toolbox_cocoond, agent, "done", llm)
    assert done["statusSource"] == "hook"
    assert "Hello from the stand-in." in screen
    keys = {
        request["headers"].get("x-api-key") or request["headers"].get("X-Api-Key") for request in llm.requests
    }
    # Even in an open sandbox the CLI holds only the credential proxy's placeholder, never the key.
    assert keys
    assert all(key.startswith("cocoon_") for key in keys)
    # Its hooks named the session the CLI stored, and the resume command picks up exactly that one.
    session = done["cliSessionId"]
    stored = sandbox_sh(toolbox_cocoond, sandbox, "cd ~/.claude/projects/-workspace && ls *.jsonl")["stdout"]
    assert stored.split() == [f"{session}.jsonl"]
    toolbox_cocoond.call("agent.kill", {"agentId": agent["id"]})
    env = {"ANTHROPIC_BASE_URL": llm.url}
    resumes_its_session(toolbox_cocoond, sandbox, "claude-code", session, llm, env, "Say hello.")


@pytest.mark.e2e
def test_claude_code_asks_permission_is_blocked_and_goes_on_when_approved(toolbox_cocoond, stage):
    cocoond = toolbox_cocoond
    llm, sandbox = stage(
        AnthropicStandIn,
        "ANTHROPIC_API_KEY",
        reply="The command ran.",
        command="echo approved > /workspace/ran.txt",
    )
    agent = spawn(cocoond, sandbox, "claude-code", "Please run the command.", ANTHROPIC_BASE_URL=llm.url)
    blocked, _screen = wait(cocoond, agent, "blocked", llm)
    assert blocked["statusSource"] == "hook"
    exists = cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["test", "-e", "ran.txt"]})
    assert exists["exitCode"] == 1  # nothing ran before the approval
    cocoond.call("agent.send_keys", {"agentId": agent["id"], "keys": ["Enter"]})  # "1. Yes" is preselected
    done, _screen = wait(cocoond, agent, "done", llm)
    assert done["statusSource"] == "hook"
    ran = cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["cat", "ran.txt"]})
    assert ran["stdout"] == "approved\n"


@pytest.mark.e2e
def test_codex_reports_done_through_notify(toolbox_cocoond, stage):
    llm, sandbox = stage(OpenAIStandIn, "OPENAI_API_KEY")
    agent = spawn(toolbox_cocoond, sandbox, "codex", "Say hello.", OPENAI_BASE_URL=llm.url)
    done, screen = wait(toolbox_cocoond, agent, "done", llm)
    assert done["statusSource"] == "hook"
    assert any(request["path"].endswith("/responses") for request in llm.requests)
    assert "Hello from the OpenAI stand-in." in screen
    # Its (trusted) UserPromptSubmit hook named the thread the CLI stored (its rollout ends in the id) ...
    thread = done["cliSessionId"]
    stored = sandbox_sh(toolbox_cocoond, sandbox, "find ~/.codex/sessions -name 'rollout-*.jsonl'")["stdout"]
    assert stored.strip().endswith(f"-{thread}.jsonl"), stored
    # ... as Codex itself takes cocoon's hooks as trusted (its app-server's account of them).
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"clientInfo": {"name": "t", "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": ["/workspace"]}},
    ]
    lines = " ".join(shlex.quote(json.dumps(request)) for request in requests)
    listed = sandbox_sh(
        toolbox_cocoond,
        sandbox,
        f"(printf '%s\\n' {lines}; sleep 5) | timeout 30 codex app-server 2>/dev/null",
    )["stdout"]
    answer = next(json.loads(line) for line in listed.splitlines() if '"id":2' in line)
    trust = {hook["eventName"]: hook["trustStatus"] for hook in answer["result"]["data"][0]["hooks"]}
    assert trust == {"userPromptSubmit": "trusted", "permissionRequest": "trusted", "postToolUse": "trusted"}
    toolbox_cocoond.call("agent.kill", {"agentId": agent["id"]})
    env = {"OPENAI_BASE_URL": llm.url}
    resumes_its_session(toolbox_cocoond, sandbox, "codex", thread, llm, env, "Say hello.")


@pytest.mark.e2e
def test_codex_asks_permission_is_blocked_and_goes_on_when_approved(toolbox_cocoond, stage):
    cocoond = toolbox_cocoond
    llm, sandbox = stage(
        OpenAIStandIn, "OPENAI_API_KEY", reply="The command ran.", command="touch /workspace/ran.txt"
    )
    # In cocoon's sandbox Codex runs commands unasked (danger-full-access); a rule of the user's makes it
    # ask for this one, as tests/screens/capture.py does.
    rule = """prefix_rule(pattern=["touch"], decision="prompt")"""
    sandbox_sh(cocoond, sandbox, f"mkdir -p ~/.codex/rules && echo '{rule}' > ~/.codex/rules/default.rules")
    agent = spawn(cocoond, sandbox, "codex", "Please run the command.", OPENAI_BASE_URL=llm.url)
    blocked, screen = wait(cocoond, agent, "blocked", llm)
    # Its PermissionRequest hook said so (cocoon's hooks are trusted: test_codex_reports_done_through_notify),
    # and the screen shows the approval it waits for.
    assert blocked["statusSource"] == "hook"
    assert "Would you like to run the following command" in screen, screen
    assert sandbox_sh(cocoond, sandbox, "test -e ran.txt")["exitCode"] == 1  # nothing ran before the approval
    cocoond.call("agent.send_keys", {"agentId": agent["id"], "keys": ["Enter"]})  # "1. Yes, proceed"
    done, screen = wait(cocoond, agent, "done", llm)
    assert done["statusSource"] == "hook"
    assert "The command ran." in screen, screen
    assert sandbox_sh(cocoond, sandbox, "test -e ran.txt")["exitCode"] == 0


@pytest.mark.e2e
def test_claude_code_in_an_egress_sandbox_talks_through_the_credential_proxy(
    toolbox_cocoond, docker_client, sandbox_image
):
    """The real CLI gets only a placeholder and the proxy's route; the stand-in (reached by the proxy on
    its outbound network) receives the real key."""
    cocoond = toolbox_cocoond
    first = cocoond.call("sandbox.create", {"network": "egress", "image": sandbox_image})  # starts the proxy
    outbound = docker_client.networks.get(f"{cocoond.instance}-outbound")
    llm = AnthropicStandIn(outbound.attrs["IPAM"]["Config"][0]["Gateway"])
    real_key = "real-anthropic-key-0123456789abcdefghij"
    cocoond.call(
        "settings.update",
        {
            "providers": {
                "company": {
                    "kind": "anthropic",
                    "baseUrl": llm.url,
                    "secret": "COMPANY_KEY",
                    "auth": "x-api-key",
                }
            }
        },
    )
    cocoond.call("secrets.set", {"name": "COMPANY_KEY", "value": real_key})
    sandbox = cocoond.call("sandbox.create", {"network": "egress", "image": sandbox_image})
    try:
        says_hello_through_the_proxy(cocoond, sandbox, llm, real_key)
        leak = cocoond.call(
            "sandbox.exec",
            {
                "sandboxId": sandbox["id"],
                "command": ["sh", "-c", "grep -rlsFf /dev/stdin /proc/[0-9]*/environ /home /tmp; true"],
                "stdin": real_key,
            },
        )
        assert leak["stdout"] == ""
    finally:
        for made in (first, sandbox):
            cocoond.post("sandbox.delete", {"sandboxId": made["id"]})
        cocoond.post("secrets.delete", {"name": "COMPANY_KEY"})
        cocoond.call("settings.reset", {"keys": ["providers"]})
        llm.close()


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("fail", "reason", "fix"),
    [
        ((401, "authentication_error"), "authentication_failed", "Settings → Providers"),
        ((429, "rate_limit_error"), "rate_limit", "rate limiting"),
        ((529, "overloaded_error"), "server_error", "server error"),
    ],
)
def test_claude_code_whose_request_is_refused_is_an_error_with_its_fix_never_done(
    toolbox_cocoond, stage, fail, reason, fix
):
    """The API refuses (a bad key, a rate limit, overloaded): the turn failed. Cocoon said `done` and
    opened a done card before."""
    llm, sandbox = stage(AnthropicStandIn, "ANTHROPIC_API_KEY", fail=fail)
    # Claude Code retries a refused request ten times with back-off (minutes) before its turn fails.
    env = {"ANTHROPIC_BASE_URL": llm.url, "CLAUDE_CODE_MAX_RETRIES": "0"}
    agent = spawn(toolbox_cocoond, sandbox, "claude-code", "Say hello.", **env)
    failed, screen = wait(toolbox_cocoond, agent, "error", llm)
    assert failed["statusSource"] == "hook"  # its StopFailure hook
    assert failed["statusReason"] == reason, screen
    assert any(request["path"].startswith("/v1/messages") for request in llm.requests)
    items = [
        item
        for item in toolbox_cocoond.call("attention.list", {"state": "all", "sandboxId": sandbox["id"]})
        if item["agentId"] == agent["id"]
    ]
    assert [item["kind"] for item in items] == ["agent_failed"], items
    assert fix in items[0]["title"]
    explained = toolbox_cocoond.call("agent.explain", {"agentId": agent["id"]})
    assert explained["agent"]["status"] == "error"
    toolbox_cocoond.call("agent.kill", {"agentId": agent["id"]})


@pytest.mark.e2e
def test_codex_whose_key_is_refused_is_an_error_with_its_fix_never_done(toolbox_cocoond, stage):
    """Codex retries, then prints the refusal and waits; no hook reports that turn's end, the screen does."""
    llm, sandbox = stage(OpenAIStandIn, "OPENAI_API_KEY", fail=(401, "invalid_api_key"))
    agent = spawn(toolbox_cocoond, sandbox, "codex", "Say hello.", OPENAI_BASE_URL=llm.url)
    failed, screen = wait(toolbox_cocoond, agent, "error", llm)
    assert (failed["rule"], failed["statusReason"]) == ("error_on_screen", "invalid_api_key"), screen
    items = [
        item
        for item in toolbox_cocoond.call("attention.list", {"state": "all", "sandboxId": sandbox["id"]})
        if item["agentId"] == agent["id"]
    ]
    assert [item["kind"] for item in items] == ["agent_failed"], items
    assert "Settings → Providers" in items[0]["title"]
    toolbox_cocoond.call("agent.kill", {"agentId": agent["id"]})


@pytest.mark.e2e
def test_a_first_claude_code_spawn_from_the_ui_says_the_key_is_missing_and_works_once_it_is_entered(
    toolbox_cocoond, docker_client, sandbox_image
):
    """Issue #37: on a server without a provider key the spawn form says so before the click and offers
    the field; the key entered there (into the vault), the next spawn from the page reaches the stand-in
    through the credential proxy and is done."""
    import re

    from playwright.sync_api import expect, sync_playwright

    from tests.conftest import CHROMIUM
    from tests.test_ui_browser import log_in

    cocoond = toolbox_cocoond
    sandbox = cocoond.call(
        "sandbox.create", {"network": "egress", "image": sandbox_image}
    )  # starts the proxy
    outbound = docker_client.networks.get(f"{cocoond.instance}-outbound")
    llm = AnthropicStandIn(outbound.attrs["IPAM"]["Config"][0]["Gateway"])
    anthropic = {"kind": "anthropic", "baseUrl": llm.url, "secret": "ANTHROPIC_API_KEY", "auth": "x-api-key"}
    cocoond.call("settings.update", {"providers": {"anthropic": anthropic}})
    real_key = "sk-ant-entered-in-the-ui-0123456789"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            log_in(page, cocoond, cocoond.token)
            page.goto(f"{cocoond.url}/sandboxes/{sandbox['id']}/")
            expect(page.locator("[data-without-provider]")).to_contain_text("claude-code")
            page.get_by_label("Key for ANTHROPIC_API_KEY").fill(real_key)
            page.locator('[data-provider-key="ANTHROPIC_API_KEY"] button').click()
            expect(page.locator(".messages")).to_contain_text("Secret ANTHROPIC_API_KEY saved.")
            expect(page.locator('[data-provider-key="ANTHROPIC_API_KEY"]')).to_have_count(0)
            page.get_by_label("Profile").select_option("claude-code")
            page.get_by_label("Prompt").fill("Say hello.")
            page.get_by_role("button", name="Spawn agent").click()
            page.wait_for_url(re.compile(r"/agents/ag_[a-z0-9]+/"))
            agent_id = page.url.rstrip("/").rsplit("/", 1)[-1]
            expect(page.locator('h1 [data-field="name"]')).to_have_text("Say hello.")
            browser.close()
        done, screen = wait(cocoond, {"id": agent_id}, "done", llm)
        assert done["statusSource"] == "hook"
        assert "Hello from the stand-in." in screen
        keys = {
            request["headers"].get("x-api-key") or request["headers"].get("X-Api-Key")
            for request in llm.requests
        }
        assert keys == {real_key}  # the one entered, sent by the proxy alone
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        cocoond.call("settings.reset", {"keys": ["providers.anthropic"]})
        cocoond.post("secrets.delete", {"name": "ANTHROPIC_API_KEY"})
        llm.close()
