"""Exfil of real credentials by an agent-scoped token (issue 13, item 4): no real provider key, bearer or
OAuth token reaches a sandbox in any network mode; the credential proxy is the only way in. A secret no
provider brokers goes in only where an admin marked it raw, and never because of an agent token; agent
tokens choose only the network modes settings.security.agentNetworkModes allows."""

import json
import re

import pytest

from tests.conftest import wait_until
from tests.leakcheck import assert_secret_absent
from tests.upstream import NAMES, STANDIN_KEY

pytestmark = pytest.mark.e2e

STANDIN = {
    "kind": "anthropic",
    "baseUrl": "https://llm.invalid/api",
    "secret": "STANDIN_SECRET",
    "auth": "x-api-key",
}
OAUTH_TOKEN = "sk-ant-oat01-real-oauth-token-0123456789"
RAW_VALUE = "raw-value-nobody-brokers-0123456789"
# Agents that write their environment where the test reads it, then wait.
WRITE_ENV = ["bash", "-c", 'env > "/tmp/env-$COCOON_AGENT_ID"; exec sleep infinity']
PROFILES = {
    "creds-env": [],
    "creds-standin": ["STANDIN_SECRET"],
    "creds-oauth": ["CLAUDE_CODE_OAUTH_TOKEN"],
    "creds-raw": ["RAW_THING"],
}


@pytest.fixture(scope="module")
def agent_token(cocoond, sandbox_image, upstream):
    """An agent-scoped token, with the stand-in as provider and every secret and profile the tests use."""
    hosts = {name: upstream.address for name in NAMES}
    cocoond.call(
        "settings.update",
        {
            "egress": {"allowlist": ["llm.invalid"], "hosts": hosts, "caBundle": upstream.ca_pem},
            "providers": {"standin": STANDIN},
        },
    )
    secrets = {"STANDIN_SECRET": STANDIN_KEY, "CLAUDE_CODE_OAUTH_TOKEN": OAUTH_TOKEN, "RAW_THING": RAW_VALUE}
    for name, value in secrets.items():
        cocoond.call("secrets.set", {"name": name, "value": value})
    for name, profile_secrets in PROFILES.items():
        cocoond.call("profile.create", {"name": name, "command": WRITE_ENV, "secrets": profile_secrets})
    yield cocoond.call("tokens.create", {"name": "credentials-attacker", "scope": "agent"})["token"]
    for name in PROFILES:
        cocoond.post("profile.delete", {"name": name})
    for name in secrets:
        cocoond.post("secrets.delete", {"name": name})
    cocoond.post("settings.reset", {"keys": ["egress", "providers", "security", "secrets"]})


def create(cocoond, token, network, sandbox_image):
    return cocoond.call("sandbox.create", {"network": network, "image": sandbox_image}, token=token)


@pytest.fixture(scope="module")
def sandboxes(cocoond, agent_token, sandbox_image):
    """One sandbox per network mode, each created by the agent token (open only once an admin allowed it)."""
    cocoond.post("settings.update", {"security": {"agentNetworkModes": ["egress", "none", "open"]}})
    made = {mode: create(cocoond, agent_token, mode, sandbox_image) for mode in ("egress", "none", "open")}
    cocoond.post("settings.reset", {"keys": ["security"]})
    yield made
    for sandbox in made.values():
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def spawn(cocoond, sandbox, profile, token, **params):
    return cocoond.post(
        "agent.spawn", {"sandboxId": sandbox["id"], "profile": profile, **params}, token=token
    )


def agent_env(cocoond, sandbox, profile, token, **params):
    """The environment an agent started with (as the agent token), read back from inside the sandbox."""
    response = spawn(cocoond, sandbox, profile, token, **params)
    assert response.status_code == 200, response.text
    path = f"/tmp/env-{response.json()['result']['id']}"
    command = {"sandboxId": sandbox["id"], "command": ["cat", path]}
    found = wait_until(lambda: (result := cocoond.call("sandbox.exec", command))["exitCode"] == 0 and result)
    return dict(line.split("=", 1) for line in found["stdout"].splitlines() if "=" in line)


def through_route(cocoond, sandbox, url, header):
    script = f"curl -sS --max-time 20 -H {json.dumps(header)} -d '{{}}' {json.dumps(url)}"
    return cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["bash", "-c", script]})


def error_of(response):
    return response.status_code, response.json()["error"]["code"]


def test_an_open_sandbox_gets_a_placeholder_and_the_route_adds_the_real_key(
    cocoond, agent_token, sandboxes, upstream, docker_client
):
    upstream.clear()
    opened = sandboxes["open"]
    env = agent_env(cocoond, opened, "creds-env", agent_token, providers=["standin"])
    assert env["ANTHROPIC_BASE_URL"] == "http://cocoon-proxy:8080/p-standin"
    assert env["ANTHROPIC_API_KEY"].startswith("cocoon_")
    assert re.search(r"_STANDIN_SECRET\.ag_[a-z0-9]+$", env["ANTHROPIC_API_KEY"])  # the agent's own
    answer = through_route(
        cocoond, opened, f"{env['ANTHROPIC_BASE_URL']}/v1/messages", f"x-api-key: {env['ANTHROPIC_API_KEY']}"
    )
    assert answer["stdout"] == "upstream llm.invalid /api/v1/messages", answer
    [request] = [r for r in upstream.requests() if r["path"] == "/api/v1/messages"]
    assert dict(request["headers"])["x-api-key"] == STANDIN_KEY
    assert_secret_absent(cocoond, opened, STANDIN_KEY, docker_client)


def test_a_sandbox_without_network_gets_no_provider_credentials_at_all(
    cocoond, agent_token, sandboxes, docker_client
):
    isolated = sandboxes["none"]
    asked = spawn(cocoond, isolated, "creds-env", agent_token, providers=["standin"])
    assert error_of(asked) == (400, "invalid_params")
    assert asked.json()["error"]["details"]["fields"][0]["code"] == "no_network"
    # A profile whose secret a provider would broker needs the proxy as well.
    through_profile = spawn(cocoond, isolated, "creds-standin", agent_token)
    assert error_of(through_profile) == (409, "conflict")
    assert "STANDIN_SECRET" in through_profile.json()["error"]["message"]
    german = cocoond.post(
        "agent.spawn",
        {"sandboxId": isolated["id"], "profile": "creds-standin"},
        token=agent_token,
        headers={"x-cocoon-lang": "de"},
    )
    assert german.json()["error"]["message"] != through_profile.json()["error"]["message"]
    # Nothing was started: no agent, no env file, no tmux session.
    assert cocoond.call("agent.list", {"sandboxId": isolated["id"]}) == []
    leftovers = cocoond.call(
        "sandbox.exec",
        {"sandboxId": isolated["id"], "command": ["bash", "-c", "ls -A ~/.cocoon/env; tmux -L cocoon ls"]},
    )
    assert leftovers["stdout"] == ""
    assert_secret_absent(cocoond, isolated, STANDIN_KEY, docker_client)


def test_an_oauth_token_is_brokered_like_an_api_key(cocoond, agent_token, sandboxes, upstream, docker_client):
    egress = sandboxes["egress"]
    env = agent_env(cocoond, egress, "creds-oauth", agent_token)
    assert env["CLAUDE_CODE_OAUTH_TOKEN"].startswith("cocoon_")
    assert re.search(r"_CLAUDE_CODE_OAUTH_TOKEN\.ag_[a-z0-9]+$", env["CLAUDE_CODE_OAUTH_TOKEN"])
    assert env["ANTHROPIC_BASE_URL"] == "http://cocoon-proxy:8080/p-anthropic-oauth"
    assert_secret_absent(cocoond, egress, OAUTH_TOKEN, docker_client)
    # The built-in route leads to api.anthropic.com; pointed at the stand-in, it shows what it sends.
    oauth = {"kind": "anthropic", "baseUrl": "https://llm.invalid/oauth", "secret": "CLAUDE_CODE_OAUTH_TOKEN"}
    cocoond.call("settings.update", {"providers": {"anthropic-oauth": oauth}})
    upstream.clear()
    header = f"Authorization: Bearer {env['CLAUDE_CODE_OAUTH_TOKEN']}"
    answer = through_route(cocoond, egress, f"{env['ANTHROPIC_BASE_URL']}/v1/messages", header)
    assert answer["stdout"] == "upstream llm.invalid /oauth/v1/messages", answer
    [request] = [r for r in upstream.requests() if r["path"] == "/oauth/v1/messages"]
    assert dict(request["headers"])["authorization"] == f"Bearer {OAUTH_TOKEN}"


def test_a_raw_secret_needs_an_admin_mark_and_an_admin_caller(cocoond, agent_token, sandboxes, docker_client):
    egress = sandboxes["egress"]
    unmarked = spawn(cocoond, egress, "creds-raw", "admin")
    assert error_of(unmarked) == (409, "conflict")
    assert "RAW_THING" in unmarked.json()["error"]["message"]
    assert_secret_absent(cocoond, egress, RAW_VALUE, docker_client)

    cocoond.call("settings.update", {"secrets": {"RAW_THING": {"raw": True}}})
    listed = {secret["name"]: secret for secret in cocoond.call("secrets.list")}
    assert listed["RAW_THING"]["raw"] is True
    assert listed["STANDIN_SECRET"]["raw"] is False
    by_agent = spawn(cocoond, egress, "creds-raw", agent_token)
    assert error_of(by_agent) == (403, "forbidden")
    assert "RAW_THING" in by_agent.json()["error"]["message"]
    # Nor through a task, whose runner starts the agent later as the server itself.
    task = {
        "prompt": "p",
        "sandbox": {"network": "egress"},
        "workflow": [{"profile": "creds-raw", "prompt": "x"}],
    }
    assert error_of(cocoond.post("task.create", task, token=agent_token)) == (403, "forbidden")
    assert_secret_absent(cocoond, egress, RAW_VALUE, docker_client)
    assert agent_env(cocoond, egress, "creds-raw", "admin")["RAW_THING"] == RAW_VALUE


def test_with_the_credential_proxy_off_a_provider_key_too_needs_the_raw_mark(cocoond, sandboxes):
    cocoond.call("settings.update", {"egress": {"credentialProxy": False}})
    try:
        refused = spawn(cocoond, sandboxes["egress"], "creds-env", "admin", providers=["standin"])
        assert error_of(refused) == (409, "conflict")
        assert "STANDIN_SECRET" in refused.json()["error"]["message"]
    finally:
        cocoond.call("settings.update", {"egress": {"credentialProxy": True}})


def test_agent_tokens_choose_only_the_allowed_network_modes(cocoond, agent_token, sandbox_image):
    before = len(cocoond.call("sandbox.list"))
    refused = cocoond.post("sandbox.create", {"network": "open", "image": sandbox_image}, token=agent_token)
    assert error_of(refused) == (403, "forbidden")
    assert "open" in refused.json()["error"]["message"]
    template = {
        "prompt": "p",
        "sandbox": {"network": "open"},
        "workflow": [{"profile": "shell", "prompt": "x"}],
    }
    assert error_of(cocoond.post("task.create", template, token=agent_token)) == (403, "forbidden")
    schedule = {"name": "creds-open", "cron": "@daily", "template": template}
    assert error_of(cocoond.post("schedule.create", schedule, token=agent_token)) == (403, "forbidden")
    assert len(cocoond.call("sandbox.list")) == before
    assert not [task for task in cocoond.call("task.list") if task["prompt"] == "p"]
    # The setting is the admin's to change; the admin token itself is not limited by it.
    cocoond.call("settings.update", {"security": {"agentNetworkModes": ["none"]}})
    try:
        egress = cocoond.post(
            "sandbox.create", {"network": "egress", "image": sandbox_image}, token=agent_token
        )
        assert error_of(egress) == (403, "forbidden")
    finally:
        cocoond.call("settings.reset", {"keys": ["security"]})


@pytest.mark.django_db
@pytest.mark.usefixtures("docker_client")
def test_the_secrets_page_warns_about_raw_secrets():
    from cocoon import config, vault
    from cocoon.actors import SYSTEM_ACTOR
    from tests.test_ui import logged_in

    client, _plain = logged_in()
    vault.set_secret("RAW_THING", RAW_VALUE, actor=SYSTEM_ACTOR)
    vault.set_secret("STANDIN_SECRET", STANDIN_KEY, actor=SYSTEM_ACTOR)
    assert "Marked raw" not in client.get("/settings/secrets").content.decode()
    config.update_settings({"secrets": {"RAW_THING": {"raw": True}}}, actor=SYSTEM_ACTOR)
    page = client.get("/settings/secrets").content.decode()
    assert "Marked raw: RAW_THING." in page
    assert page.count(">raw</span>") == 1
    german = client.get("/settings/secrets", headers={"accept-language": "de"}).content.decode()
    assert "Als roh markiert: RAW_THING." in german
