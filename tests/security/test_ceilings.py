"""Token ceilings (#30): an agent token made with ceilings (tokens.create {ceilings}) never gets a wider
network mode, more CPUs or memory, or other providers than they say, on any way in (a create, a spawn, a
task's template); its defaults are the ceilings where the server's are above them; a refusal is
ceiling_exceeded naming the ceiling, its limit and what was asked, and leaves nothing behind."""

import secrets

import pytest

from tests.security.test_quotas import engine_objects

CEILINGS = {"networks": ["none"], "cpus": 1, "memoryMb": 512, "providers": ["anthropic"]}


@pytest.fixture
def narrowed(cocoond):
    name = f"ceil-{secrets.token_hex(3)}"
    cocoond.call("projects.create", {"id": name, "name": name})
    made = cocoond.call(
        "tokens.create", {"name": name, "scope": "agent", "project": name, "ceilings": CEILINGS}
    )
    assert made["ceilings"] == CEILINGS
    yield made["token"]
    for sandbox in cocoond.call("sandbox.list", token=made["token"]):
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def refused(response, ceiling: str, limit, asked) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "ceiling_exceeded"
    assert {key: error["details"][key] for key in ("ceiling", "limit", "asked")} == {
        "ceiling": ceiling,
        "limit": limit,
        "asked": asked,
    }


def test_a_sandbox_gets_the_ceilings_as_defaults_and_nothing_above_them(
    cocoond, narrowed, sandbox_image, docker_client
):
    made = cocoond.call("sandbox.create", {"image": sandbox_image, "pool": False}, token=narrowed)
    # The server's defaults (egress, 2 CPUs, 4 GiB) are above the ceilings: the ceilings are the defaults.
    assert (made["network"], made["limits"]["cpus"], made["limits"]["memoryMb"]) == ("none", 1, 512)
    before = engine_objects(docker_client, cocoond.instance)
    asks = [
        ({"network": "egress"}, ("networks", "none", "egress")),
        ({"limits": {"cpus": 2}}, ("cpus", 1, 2)),
        ({"limits": {"memoryMb": 1024}}, ("memoryMb", 512, 1024)),
    ]
    for ask, (ceiling, limit, asked) in asks:
        params = {"image": sandbox_image, "pool": False, "name": f"c-{secrets.token_hex(3)}", **ask}
        refused(cocoond.post("sandbox.create", params, token=narrowed), ceiling, limit, asked)
    assert engine_objects(docker_client, cocoond.instance) == before
    assert [each["id"] for each in cocoond.call("sandbox.list", token=narrowed)] == [made["id"]]


def test_a_task_template_above_the_ceilings_is_refused_before_it_is_queued(cocoond, narrowed):
    step = {"profile": "shell", "prompt": "true", "timeoutS": 30}
    for sandbox, ceiling in (
        ({"network": "egress"}, "networks"),
        ({"network": "none", "limits": {"cpus": 4}}, "cpus"),
    ):
        response = cocoond.post(
            "task.create", {"prompt": "t", "sandbox": sandbox, "workflow": [step]}, token=narrowed
        )
        assert response.json()["error"]["code"] == "ceiling_exceeded", response.text
        assert response.json()["error"]["details"]["ceiling"] == ceiling
    assert cocoond.call("task.list", token=narrowed) == []


def test_an_agent_gets_only_the_providers_within_the_ceiling(start_cocoond, sandbox_image):
    instance = start_cocoond()
    for secret in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        instance.call("secrets.set", {"name": secret, "value": f"{secret.lower()}-0123456789abcdefghij"})
    ceilings = {"providers": ["anthropic"]}
    token = instance.call("tokens.create", {"name": "n", "scope": "agent", "ceilings": ceilings})["token"]
    sandbox = instance.call("sandbox.create", {"image": sandbox_image, "network": "egress"}, token=token)
    spawn = {"sandboxId": sandbox["id"], "profile": "shell"}
    refused(
        instance.post("agent.spawn", spawn | {"providers": ["openai"]}, token=token),
        "providers",
        "anthropic",
        "openai",
    )
    assert instance.call("agent.list", {"sandboxId": sandbox["id"]}, token=token) == []
    agent = instance.call("agent.spawn", spawn | {"providers": ["anthropic"]}, token=token)
    assert agent["sandboxId"] == sandbox["id"]


def test_only_an_agent_token_has_ceilings(cocoond):
    response = cocoond.post("tokens.create", {"name": "a", "scope": "admin", "ceilings": {"cpus": 1}})
    assert response.json()["error"]["code"] == "invalid_params"
    response = cocoond.post("tokens.create", {"name": "a", "scope": "agent", "ceilings": {"cpus": 0}})
    assert response.json()["error"]["code"] == "invalid_params"
