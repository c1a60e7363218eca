"""Steering agents (#30): agent.spawn {steering} gives the agent a token of its own, inside its sandbox.
With it the agent creates child sandboxes and agents and sees only those; it never gets a wider network
mode, more CPUs or memory, or other providers than its parent's; its siblings' children stay out of its
sight; and when it ends (killed, exited, its sandbox deleted) its token is revoked, and with it the tokens
of the steering agents it spawned itself."""

import secrets

import pytest

from tests.conftest import wait_until
from tests.security.test_ceilings import refused
from tests.test_egress import in_agent

PARENT = {"network": "none", "limits": {"cpus": 1, "memoryMb": 1024}, "pool": False}


@pytest.fixture
def project_token(cocoond):
    """An agent token of a project of its own, and the sandboxes made in that project, deleted afterwards."""
    name = f"steer-{secrets.token_hex(3)}"
    cocoond.call("projects.create", {"id": name, "name": name})
    token = cocoond.call("tokens.create", {"name": name, "scope": "agent", "project": name})["token"]
    yield token
    for sandbox in cocoond.call("sandbox.list", token=token):
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def steering_agent(cocoond, sandbox, token, steering):
    """A shell agent spawned with steering, and the token and URL it finds in its environment."""
    params = {"sandboxId": sandbox["id"], "profile": "shell", "steering": steering}
    agent = cocoond.call("agent.spawn", params, token=token)
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 20})
    out = f"/tmp/steer-{agent['id']}"
    found = in_agent(cocoond, agent, sandbox, f'echo "$COCOON_URL $COCOON_TOKEN" > {out}', out).split()
    assert found[0] == cocoond.url
    return agent, found[1]


def error_code(response) -> str:
    return response.json()["error"]["code"]


def test_a_steering_agent_makes_and_sees_only_its_own_children_and_never_above_its_parent(
    cocoond, project_token, sandbox_image
):
    parent = cocoond.call("sandbox.create", {"image": sandbox_image, **PARENT}, token=project_token)
    tokens_before = len(cocoond.call("tokens.list"))
    # Asked above the parent: refused before anything is made (no agent, no token).
    for steering, (ceiling, limit, asked) in (
        ({"networks": ["egress"]}, ("networks", "none", "egress")),
        ({"cpus": 2}, ("cpus", 1, 2)),
        ({"memoryMb": 2048}, ("memoryMb", 1024, 2048)),
        ({"providers": ["anthropic"]}, ("providers", "-", "anthropic")),
    ):
        params = {"sandboxId": parent["id"], "profile": "shell", "steering": steering}
        refused(cocoond.post("agent.spawn", params, token=project_token), ceiling, limit, asked)
    assert cocoond.call("agent.list", {"sandboxId": parent["id"]}) == []
    assert len(cocoond.call("tokens.list")) == tokens_before

    agent, steer = steering_agent(cocoond, parent, project_token, {})
    bounds = {"networks": ["none"], "providers": [], "cpus": 1, "memoryMb": 1024}
    assert agent["steering"] == bounds
    minted = next(each for each in cocoond.call("tokens.list") if each["agentId"] == agent["id"])
    assert (minted["project"], minted["sandboxes"], minted["ceilings"]) == (parent["project"], "own", bounds)

    # It sees nothing but what it makes: not its own sandbox, not its project's others.
    assert cocoond.call("sandbox.list", token=steer) == []
    assert error_code(cocoond.post("sandbox.get", {"sandboxId": parent["id"]}, token=steer)) == "not_found"
    assert cocoond.call("agent.list", token=steer) == []
    child = cocoond.call("sandbox.create", {"image": sandbox_image, "pool": False}, token=steer)
    assert (child["network"], child["limits"]["cpus"], child["limits"]["memoryMb"]) == ("none", 1, 1024)
    ask = {"image": sandbox_image, "pool": False, "network": "egress"}
    refused(cocoond.post("sandbox.create", ask, token=steer), "networks", "none", "egress")
    ask = {"image": sandbox_image, "pool": False, "limits": {"cpus": 2}}
    refused(cocoond.post("sandbox.create", ask, token=steer), "cpus", 1, 2)
    assert [each["id"] for each in cocoond.call("sandbox.list", token=steer)] == [child["id"]]

    # Its child steers in turn, narrower still; a sibling of the first sees none of their sandboxes.
    grandchild, steer_below = steering_agent(cocoond, child, steer, {"memoryMb": 512})
    assert grandchild["steering"] == bounds | {"memoryMb": 512}
    ask = {"image": sandbox_image, "pool": False, "limits": {"memoryMb": 1024}}
    refused(cocoond.post("sandbox.create", ask, token=steer_below), "memoryMb", 512, 1024)
    _sibling, steer_beside = steering_agent(cocoond, parent, project_token, {})
    for token in (steer_below, steer_beside):
        assert error_code(cocoond.post("sandbox.get", {"sandboxId": child["id"]}, token=token)) == "not_found"
        response = cocoond.post("sandbox.exec", {"sandboxId": child["id"], "command": ["true"]}, token=token)
        assert error_code(response) == "not_found"

    # It ends: its token and the one below it are revoked; the sibling's stays; the child is its project's.
    cocoond.call("agent.kill", {"agentId": agent["id"]}, token=project_token)
    for token in (steer, steer_below):
        assert error_code(cocoond.post("sandbox.list", token=token)) == "token_revoked"
    assert cocoond.call("sandbox.list", token=steer_beside) == []
    assert child["id"] in [each["id"] for each in cocoond.call("sandbox.list", token=project_token)]


def test_a_steering_token_ends_when_its_agent_exits_or_its_sandbox_is_deleted(
    cocoond, project_token, sandbox_image
):
    first = cocoond.call("sandbox.create", {"image": sandbox_image, **PARENT}, token=project_token)
    agent, steer = steering_agent(cocoond, first, project_token, {})
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": "exit"})
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["exited"], "timeoutS": 30})
    wait_until(lambda: error_code(cocoond.post("sandbox.list", token=steer)) == "token_revoked")

    second = cocoond.call("sandbox.create", {"image": sandbox_image, **PARENT}, token=project_token)
    _agent, steer = steering_agent(cocoond, second, project_token, {})
    cocoond.call("sandbox.delete", {"sandboxId": second["id"]}, token=project_token)
    assert error_code(cocoond.post("sandbox.list", token=steer)) == "token_revoked"


def test_a_steering_agents_budget_is_carved_out_of_its_parents_and_never_grows(
    cocoond, project_token, sandbox_image
):
    parent = cocoond.call("sandbox.create", {"image": sandbox_image, **PARENT}, token=project_token)
    agent, steer = steering_agent(cocoond, parent, project_token, {"budget": {"cost": 10}})
    assert agent["steering"]["budget"] == {"cost": 10}

    def create(token, **params):
        return cocoond.post("sandbox.create", {"image": sandbox_image, "pool": False, **params}, token=token)

    first = create(steer, budget={"cost": 4}).json()["result"]
    assert first["budget"] == {"cost": 4}
    refused(create(steer, budget={"cost": 7}), "budget.cost", 6, 7)
    # A steering agent below carves its budget out of the same: 3 of the 6 left.
    below, steer_below = steering_agent(cocoond, first, steer, {"budget": {"cost": 3}})
    assert below["steering"]["budget"] == {"cost": 3}
    refused(create(steer_below, budget={"cost": 5}), "budget.cost", 3, 5)
    # A create that fails gives back what it carved: nothing was made.
    assert (
        error_code(create(steer_below, image="cocoon-none:missing", budget={"cost": 2})) == "invalid_params"
    )
    assert create(steer_below, budget={"cost": 3}).json()["result"]["budget"] == {"cost": 3}
    refused(create(steer_below), "budget.cost", 0, 0)
    # Without a budget asked, a sandbox gets all that is left; then nothing more is made.
    assert create(steer).json()["result"]["budget"] == {"cost": 3}
    refused(create(steer), "budget.cost", 0, 0)
    task = {
        "prompt": "t",
        "sandbox": {"network": "none", "limits": {"cpus": 1, "memoryMb": 512}},
        "workflow": [{"profile": "shell", "prompt": "true"}],
    }
    refused(cocoond.post("task.create", task, token=steer), "budget.cost", 0, 0)
    schedule = {"name": "s", "cron": "0 * * * *", "template": task}
    response = cocoond.post("schedule.create", schedule, token=steer)
    assert (error_code(response), response.json()["error"]["details"]["asked"]) == (
        "ceiling_exceeded",
        "schedule",
    )
