"""Project quotas (#30): past a quota (or a person's share of it) a create, start or spawn answers
quota_exceeded naming the quota, its limit and its use, and leaves nothing behind: no container, no
volume, no network, no row."""

import json
import secrets
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.security.test_revocation import manage


def engine_objects(docker_client, instance: str) -> set[str]:
    """The ids of the instance's containers, volumes and networks."""
    label = {"label": f"io.cocoon.instance={instance}"}
    return (
        {container.id for container in docker_client.containers.list(all=True, filters=label)}
        | {volume.name for volume in docker_client.volumes.list(filters=label)}
        | {network.id for network in docker_client.networks.list(filters=label)}
    )


@pytest.fixture
def project(cocoond):
    """A project of its own, with an agent token; its sandboxes are deleted afterwards."""
    name = f"quota-{secrets.token_hex(3)}"
    cocoond.call("projects.create", {"id": name, "name": name})
    token = cocoond.call("tokens.create", {"name": name, "scope": "agent", "project": name})["token"]
    yield name, token
    for sandbox in cocoond.call("sandbox.list", token=token):
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def refused(response, quota: str, limit, used) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert {key: error["details"][key] for key in ("quota", "limit", "used")} == {
        "quota": quota,
        "limit": limit,
        "used": used,
    }
    assert quota in error["message"]


def test_past_the_sandboxes_quota_a_create_is_refused_and_leaves_nothing(
    cocoond, project, sandbox_image, docker_client
):
    name, token = project
    cocoond.call("projects.update", {"id": name, "quotas": {"sandboxes": 1}})
    params = {"network": "egress", "image": sandbox_image, "pool": False}
    first = cocoond.call("sandbox.create", params, token=token)
    before = engine_objects(docker_client, cocoond.instance)
    refused(
        cocoond.post("sandbox.create", params | {"name": f"q-{secrets.token_hex(3)}"}, token=token),
        "sandboxes",
        1,
        1,
    )
    assert engine_objects(docker_client, cocoond.instance) == before
    assert [each["id"] for each in cocoond.call("sandbox.list", token=token)] == [first["id"]]
    # A stopped sandbox counts no more: another may be made, and then the stopped one cannot start.
    cocoond.call("sandbox.stop", {"sandboxId": first["id"]}, token=token)
    second = cocoond.call("sandbox.create", params, token=token)
    refused(cocoond.post("sandbox.start", {"sandboxId": first["id"]}, token=token), "sandboxes", 1, 1)
    assert cocoond.call("sandbox.get", {"sandboxId": first["id"]}, token=token)["state"] == "stopped"
    # Other projects are not held to it.
    other = cocoond.call("sandbox.create", params)
    cocoond.call("sandbox.delete", {"sandboxId": other["id"]})
    cocoond.call("sandbox.delete", {"sandboxId": second["id"]}, token=token)


def test_cpus_memory_and_agents_quotas_count_what_is_in_use(cocoond, project, sandbox_image):
    name, token = project
    cocoond.call("projects.update", {"id": name, "quotas": {"cpus": 1.5, "memoryMb": 1024, "agents": 1}})
    small = {"network": "none", "image": sandbox_image, "pool": False, "limits": {"cpus": 1, "memoryMb": 512}}
    sandbox = cocoond.call("sandbox.create", small, token=token)
    refused(cocoond.post("sandbox.create", small, token=token), "cpus", 1.5, 1.0)
    refused(
        cocoond.post("sandbox.create", small | {"limits": {"cpus": 0.5, "memoryMb": 768}}, token=token),
        "memoryMb",
        1024,
        512,
    )
    agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"}, token=token)
    refused(
        cocoond.post("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"}, token=token),
        "agents",
        1,
        1,
    )
    assert [each["id"] for each in cocoond.call("agent.list", token=token)] == [agent["id"]]
    cocoond.call("agent.kill", {"agentId": agent["id"]}, token=token)
    # An exited agent counts no more.
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["exited"], "timeoutS": 30}, token=token)
    cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"}, token=token)


def test_creates_at_once_never_take_more_than_the_quota(cocoond, project, sandbox_image):
    name, token = project
    cocoond.call("projects.update", {"id": name, "quotas": {"sandboxes": 2}})
    params = {"network": "none", "image": sandbox_image, "pool": False}
    with ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda _: cocoond.post("sandbox.create", params, token=token), range(5)))
    assert sorted(answer.status_code for answer in answers) == [200, 200, 403, 403, 403]
    assert len(cocoond.call("sandbox.list", token=token)) == 2


def test_a_persons_share_of_the_quotas_counts_only_what_they_made(cocoond, project, sandbox_image, tmp_path):
    name, token = project
    people = {who: f"{who}-{secrets.token_hex(3)}" for who in ("capped", "free")}
    made = tmp_path / "tokens.json"
    manage(
        cocoond,
        "import json; from django.contrib.auth import get_user_model; from cocoon import tokens; "
        f"User = get_user_model(); plain = {{}}\n"
        f"for who, username in {people!r}.items():\n"
        f"    user = User.objects.create_user(username, password='pw')\n"
        f"    plain[who] = tokens.create_token(username, 'user', user=user, project={name!r})[1]\n"
        f"open({str(made)!r}, 'w').write(json.dumps(plain))",
    )
    plain = json.loads(made.read_text())
    for who in people:
        cocoond.call("projects.set_member", {"project": name, "user": people[who], "role": "member"})
    share = {"sandboxes": 1, "agents": 1}
    member = cocoond.call(
        "projects.set_member", {"project": name, "user": people["capped"], "role": "member", "quotas": share}
    )
    assert member["quotas"] == share
    params = {"network": "none", "image": sandbox_image, "pool": False}
    mine = cocoond.call("sandbox.create", params, token=plain["capped"])
    response = cocoond.post("sandbox.create", params, token=plain["capped"])
    refused(response, "sandboxes", 1, 1)
    assert response.json()["error"]["details"]["user"] == people["capped"]
    # Another person's and the project's own token are not counted against it, nor it against them.
    cocoond.call("sandbox.create", params, token=plain["free"])
    cocoond.call("sandbox.create", params, token=token)
    spawn = {"sandboxId": mine["id"], "profile": "shell"}
    cocoond.call("agent.spawn", spawn, token=plain["capped"])
    refused(cocoond.post("agent.spawn", spawn, token=plain["capped"]), "agents", 1, 1)
    # The agents in a person's sandboxes are theirs, whoever spawns them.
    refused(cocoond.post("agent.spawn", spawn, token=token), "agents", 1, 1)
