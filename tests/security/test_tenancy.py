"""Tenancy across the boundary (#30): a project's token, and a token narrowed to its own sandboxes, against
another project's sandboxes and agents through every transport: HTTP and WebSocket RPC, MCP, events,
the archive download, the terminal attach and the activity log. Someone else's object answers exactly as
a missing one does. On main before #30 every one of these attacks succeeded (an agent token saw and drove
every sandbox on the server)."""

import secrets

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.conftest import wait_until
from tests.test_mcp import run as run_mcp

MISSING = "sb_doesnotexist0"


@pytest.fixture(scope="module")
def tenants(cocoond, sandbox_image):
    """Two projects, each with an agent token and a sandbox (with a shell agent) it made; a token of the
    first narrowed to its own sandboxes, with one of its own."""
    suffix = secrets.token_hex(3)
    made = {}
    for name in ("alpha", "beta"):
        project = f"{name}-{suffix}"
        cocoond.call("projects.create", {"id": project, "name": name.title()})
        token = cocoond.call("tokens.create", {"name": f"{name}-agent", "scope": "agent", "project": project})
        sandbox = cocoond.call(
            "sandbox.create", {"network": "none", "image": sandbox_image}, token=token["token"]
        )
        made[name] = {"project": project, "token": token["token"], "sandbox": sandbox}
    own = cocoond.call(
        "tokens.create",
        {"name": "alpha-own", "scope": "agent", "project": made["alpha"]["project"], "sandboxes": "own"},
    )
    own_sandbox = cocoond.call(
        "sandbox.create", {"network": "none", "image": sandbox_image}, token=own["token"]
    )
    made["own"] = {"project": made["alpha"]["project"], "token": own["token"], "sandbox": own_sandbox}
    beta = made["beta"]
    beta["agent"] = cocoond.call(
        "agent.spawn", {"sandboxId": beta["sandbox"]["id"], "profile": "shell"}, token=beta["token"]
    )
    yield made
    for each in made.values():
        cocoond.post("sandbox.delete", {"sandboxId": each["sandbox"]["id"]})


def refused_as_missing(response: httpx.Response, sandbox_id: str, missing: httpx.Response) -> None:
    """Answered not_found, word for word as the missing id's answer but for the id."""
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "not_found"
    assert (
        response.json()["error"]["message"].replace(sandbox_id, MISSING) == missing.json()["error"]["message"]
    )


def test_a_project_sees_only_its_own_sandboxes_and_an_admin_sees_all(cocoond, tenants):
    alpha, beta, own = tenants["alpha"], tenants["beta"], tenants["own"]
    listed = {each["id"] for each in cocoond.call("sandbox.list", token=alpha["token"])}
    assert alpha["sandbox"]["id"] in listed
    assert own["sandbox"]["id"] in listed
    assert beta["sandbox"]["id"] not in listed
    assert {each["id"] for each in cocoond.call("sandbox.list", token=beta["token"])} == {
        beta["sandbox"]["id"]
    }
    everything = {each["id"]: each["project"] for each in cocoond.call("sandbox.list")}
    assert everything[alpha["sandbox"]["id"]] == alpha["project"]
    assert everything[beta["sandbox"]["id"]] == beta["project"]
    assert {project["id"] for project in cocoond.call("projects.list", token=alpha["token"])} == {
        alpha["project"]
    }


def test_another_projects_sandbox_answers_as_a_missing_one_on_every_method(cocoond, tenants):
    alpha, beta = tenants["alpha"], tenants["beta"]
    target = beta["sandbox"]["id"]
    for method, params in [
        ("sandbox.get", {}),
        ("sandbox.exec", {"command": ["true"]}),
        ("files.read", {"path": "/workspace/README.md"}),
        ("files.write", {"path": "/workspace/x", "content": "x"}),
        ("sandbox.diff", {}),
        ("sandbox.stop", {}),
        ("sandbox.rename", {"name": f"taken-{secrets.token_hex(3)}"}),
        ("sandbox.delete", {}),
        ("agent.list", {}),
        ("agent.spawn", {"profile": "shell"}),
    ]:
        missing = cocoond.post(method, {"sandboxId": MISSING, **params}, token=alpha["token"])
        refused_as_missing(
            cocoond.post(method, {"sandboxId": target, **params}, token=alpha["token"]), target, missing
        )
    agent = beta["agent"]["id"]
    for method, params in [("agent.get", {}), ("agent.send_input", {"text": "id"}), ("agent.kill", {})]:
        response = cocoond.post(method, {"agentId": agent, **params}, token=alpha["token"])
        assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found"), response.text
    # Nothing was done: beta's sandbox and agent are as they were.
    assert cocoond.call("sandbox.get", {"sandboxId": target}, token=beta["token"])["state"] == "running"
    assert cocoond.call("agent.get", {"agentId": agent}, token=beta["token"])["status"] != "exited"


def test_a_token_narrowed_to_its_own_sandboxes_sees_none_of_its_projects_others(cocoond, tenants):
    alpha, own = tenants["alpha"], tenants["own"]
    assert [each["id"] for each in cocoond.call("sandbox.list", token=own["token"])] == [own["sandbox"]["id"]]
    response = cocoond.post(
        "sandbox.exec", {"sandboxId": alpha["sandbox"]["id"], "command": ["true"]}, token=own["token"]
    )
    assert response.status_code == 404, response.text
    # Its project's token sees what it made.
    assert cocoond.call("sandbox.get", {"sandboxId": own["sandbox"]["id"]}, token=alpha["token"])


def test_websocket_rpc_and_mcp_answer_the_same(cocoond, tenants):
    alpha, beta = tenants["alpha"], tenants["beta"]
    target = beta["sandbox"]["id"]
    with cocoond.ws(token=alpha["token"]) as ws:
        frame = ws.request("sandbox.exec", {"sandboxId": target, "command": ["true"]})
    assert frame["error"]["code"] == "not_found"

    async def attack(session):
        return await session.call_tool("sandbox_exec", {"sandboxId": target, "command": ["true"]})

    result = run_mcp(cocoond, attack, token=alpha["token"])
    assert result.is_error
    assert "not_found" in result.content[0].text


def test_events_and_activity_of_another_project_never_reach_a_subscriber(cocoond, tenants):
    alpha, beta = tenants["alpha"], tenants["beta"]
    with cocoond.ws(token=alpha["token"]) as ws:
        ws.call("events.subscribe", {"types": ["sandbox.updated", "activity"]})
        cocoond.call(
            "sandbox.rename",
            {"sandboxId": beta["sandbox"]["id"], "name": f"b-{secrets.token_hex(3)}"},
            token=beta["token"],
        )
        sentinel = f"a-{secrets.token_hex(3)}"
        cocoond.call(
            "sandbox.rename", {"sandboxId": alpha["sandbox"]["id"], "name": sentinel}, token=alpha["token"]
        )
        heard = []
        while not any(event["event"]["data"].get("name") == sentinel for event in heard):
            heard.append(ws.next_event(timeout=30))
    assert {event["event"]["sandboxId"] for event in heard} == {alpha["sandbox"]["id"]}
    entries = cocoond.call("activity.list", {"limit": 200}, token=alpha["token"])
    assert beta["sandbox"]["id"] not in {entry["sandboxId"] for entry in entries}
    assert alpha["sandbox"]["id"] in {entry["sandboxId"] for entry in entries}


def test_archive_and_attach_refuse_another_projects_sandbox(cocoond, tenants):
    alpha, beta = tenants["alpha"], tenants["beta"]
    archive = httpx.get(
        f"{cocoond.url}/v1/sandboxes/{beta['sandbox']['id']}/archive",
        headers={"Authorization": f"Bearer {alpha['token']}"},
        timeout=30,
    )
    assert archive.status_code == 404
    assert archive.json()["error"]["code"] == "not_found"
    url = f"ws://127.0.0.1:{cocoond.port}/v1/agents/{beta['agent']['id']}/attach?token={alpha['token']}"
    with connect(url, open_timeout=10) as ws, pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4404
    # Its own project's token attaches.
    url = f"ws://127.0.0.1:{cocoond.port}/v1/agents/{beta['agent']['id']}/attach?token={beta['token']}"
    with connect(url, open_timeout=10) as ws:
        assert ws.recv(timeout=10)


def test_projects_are_named_only_where_they_may_be(cocoond, tenants, sandbox_image):
    alpha, beta = tenants["alpha"], tenants["beta"]
    # A project's token cannot make a sandbox in another project, nor a token name a missing project.
    response = cocoond.post(
        "sandbox.create",
        {"network": "none", "image": sandbox_image, "project": beta["project"]},
        token=alpha["token"],
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert beta["project"] not in {
        each["project"] for each in cocoond.call("sandbox.list", token=alpha["token"])
    }
    response = cocoond.post(
        "tokens.create", {"name": "x", "scope": "agent", "project": "nowhere-" + secrets.token_hex(3)}
    )
    assert response.status_code == 404
    response = cocoond.post("tokens.create", {"name": "x", "scope": "admin", "project": alpha["project"]})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_params"
    assert cocoond.post("projects.create", {"id": alpha["project"], "name": "again"}).status_code == 409
    assert cocoond.post("projects.create", {"id": "x", "name": "x"}, token=alpha["token"]).status_code == 403


def test_an_admins_sandbox_lands_in_the_project_it_names(cocoond, tenants, sandbox_image):
    beta = tenants["beta"]
    made = cocoond.call(
        "sandbox.create", {"network": "none", "image": sandbox_image, "project": beta["project"]}
    )
    try:
        assert made["project"] == beta["project"]
        assert made["id"] in {each["id"] for each in cocoond.call("sandbox.list", token=beta["token"])}
    finally:
        cocoond.call("sandbox.delete", {"sandboxId": made["id"]})


def test_tasks_schedules_and_their_events_are_their_projects(cocoond, tenants):
    alpha, beta = tenants["alpha"], tenants["beta"]
    schedule = cocoond.call(
        "schedule.create",
        {
            "name": f"beta-{secrets.token_hex(3)}",
            "cron": "@yearly",
            "enabled": False,
            "template": {"prompt": "x"},
        },
        token=beta["token"],
    )
    with cocoond.ws(token=alpha["token"]) as ws:
        ws.call("events.subscribe", {"types": ["task.updated", "schedule.updated"]})
        task = cocoond.call(
            "task.create",
            {"prompt": "wait", "sandboxId": beta["sandbox"]["id"], "workflow": [{"profile": "shell"}]},
            token=beta["token"],
        )
        try:
            for method, params in [
                ("task.get", {"taskId": task["id"]}),
                ("task.cancel", {"taskId": task["id"]}),
                ("schedule.get", {"scheduleId": schedule["id"]}),
                ("schedule.run", {"scheduleId": schedule["id"]}),
                ("schedule.delete", {"scheduleId": schedule["id"]}),
                ("task.list", {"scheduleId": schedule["id"]}),
                ("task.create", {"prompt": "x", "sandboxId": beta["sandbox"]["id"]}),
            ]:
                response = cocoond.post(method, params, token=alpha["token"])
                assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found"), method
            assert task["id"] not in {each["id"] for each in cocoond.call("task.list", token=alpha["token"])}
            assert schedule["id"] not in {
                each["id"] for each in cocoond.call("schedule.list", token=alpha["token"])
            }
            assert task["id"] in {each["id"] for each in cocoond.call("task.list", token=beta["token"])}
            # A sentinel of its own: heard only once everything of beta's before it was not.
            mine = cocoond.call(
                "schedule.create",
                {
                    "name": f"alpha-{secrets.token_hex(3)}",
                    "cron": "@yearly",
                    "enabled": False,
                    "template": {"prompt": "x"},
                },
                token=alpha["token"],
            )
            heard = ws.next_event(timeout=30)["event"]
            assert (heard["type"], heard["data"]["id"]) == ("schedule.updated", mine["id"])
        finally:
            cocoond.call("task.cancel", {"taskId": task["id"]}, token=beta["token"])
    assert (
        cocoond.call("schedule.get", {"scheduleId": schedule["id"]}, token=beta["token"])["id"]
        == schedule["id"]
    )


def test_a_tasks_own_sandbox_is_its_projects(cocoond, tenants):
    alpha, beta = tenants["alpha"], tenants["beta"]
    task = cocoond.call(
        "task.create",
        {"prompt": "wait", "sandbox": {"network": "none"}, "workflow": [{"profile": "shell"}]},
        token=beta["token"],
    )
    try:
        sandbox_id = wait_until(
            lambda: cocoond.call("task.get", {"taskId": task["id"]}, token=beta["token"])["sandboxId"],
            timeout=90,
        )
        assert (
            cocoond.call("sandbox.get", {"sandboxId": sandbox_id}, token=beta["token"])["project"]
            == beta["project"]
        )
        assert cocoond.post("sandbox.get", {"sandboxId": sandbox_id}, token=alpha["token"]).status_code == 404
    finally:
        cocoond.call("task.cancel", {"taskId": task["id"]}, token=beta["token"])


def test_a_name_is_unique_in_its_project_so_another_projects_names_are_not_learned(
    cocoond, tenants, sandbox_image
):
    alpha, beta = tenants["alpha"], tenants["beta"]
    name = f"same-{secrets.token_hex(3)}"
    params = {"network": "none", "image": sandbox_image, "name": name}
    made = [cocoond.call("sandbox.create", params, token=each["token"]) for each in (alpha, beta)]
    try:
        assert [each["name"] for each in made] == [name, name]
        again = cocoond.post("sandbox.create", params, token=alpha["token"])
        assert (again.status_code, again.json()["error"]["code"]) == (409, "conflict")
        schedule = {"name": name, "cron": "@yearly", "enabled": False, "template": {"prompt": "x"}}
        for each in (alpha, beta):
            cocoond.call("schedule.create", schedule, token=each["token"])
    finally:
        for sandbox in made:
            cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})
