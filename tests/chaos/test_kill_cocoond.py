"""Chaos (issue #14): cocoond SIGKILLed in the middle of a call, then started again on the same data and
instance. Afterwards rows and engine objects agree (nothing half made, nothing orphaned), the server
answers, and the same call works again."""

import fcntl
import json
import sqlite3
from contextlib import closing
from typing import Any

import pytest

from agents.tmux import WATCH_SESSION
from tests.chaos.faults import (
    assert_rows_match_engine,
    egress_sandbox,
    kill_during,
    sandbox_containers,
    settle,
)
from tests.conftest import wait_until
from tests.test_egress import curl

pytestmark = pytest.mark.e2e
ATTEMPTS = 5  # a kill that came after the answer proves nothing: try again
FILES = (
    2000  # files a patch creates: enough that applying it takes a while (300 was missed on a busy machine)
)


def interrupt(cocoond, method: str, params: Any, ready) -> None:
    """Kill cocoond while the call is open (retrying when the answer came first), restart it."""
    for _attempt in range(ATTEMPTS):
        cut = kill_during(cocoond, method, params, ready)
        cocoond.start()
        if cut.interrupted:
            return
    pytest.fail(f"{method} answered every time before the kill")


def a_sandbox_container(docker_client, cocoond, known: set[str] = frozenset()):
    return lambda: sandbox_containers(docker_client, cocoond.instance) - known


def test_a_killed_create_is_undone_at_the_restart(start_cocoond, sandbox_image, docker_client):
    cocoond = start_cocoond()
    params = {"network": "none", "image": sandbox_image}
    interrupt(cocoond, "sandbox.create", params, a_sandbox_container(docker_client, cocoond))
    rows = assert_rows_match_engine(cocoond, docker_client)
    assert rows == [], "the killed create left its sandbox half made"
    created = cocoond.call("sandbox.create", params)
    assert cocoond.call("sandbox.exec", {"sandboxId": created["id"], "command": ["true"]})["exitCode"] == 0
    cocoond.call("sandbox.delete", {"sandboxId": created["id"]})
    assert_rows_match_engine(cocoond, docker_client)


def test_a_create_killed_while_the_policy_is_published_is_undone(start_cocoond, sandbox_image, docker_client):
    cocoond = start_cocoond()
    cocoond.call("egress.start_proxy")
    params = {"network": "egress", "image": sandbox_image}
    interrupt(cocoond, "sandbox.create", params, a_sandbox_container(docker_client, cocoond))
    assert assert_rows_match_engine(cocoond, docker_client) == []

    def policy_without_the_undone_sandbox() -> None:
        status = cocoond.call("egress.status")
        assert status["running"], status
        assert status["policyError"] is None, status
        assert status["acknowledgedVersion"] == status["policyVersion"], status
        policy = json.loads((cocoond.data / "egress" / "policy.json").read_text())
        assert policy["sandboxes"] == {}, policy

    settle(policy_without_the_undone_sandbox)
    created = cocoond.call("sandbox.create", params)
    assert created["state"] == "running"
    cocoond.call("sandbox.delete", {"sandboxId": created["id"]})


def test_a_killed_spawn_leaves_no_agent_without_its_row(start_cocoond, sandbox_image, docker_client):
    cocoond = start_cocoond()
    sandbox = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    container = docker_client.containers.get(f"{cocoond.instance}-{sandbox['id']}")

    def sessions() -> set[str]:
        result = container.exec_run(["tmux", "-L", "cocoon", "ls", "-F", "#S"], user="agent")
        names = set(result.output.decode().split()) if result.exit_code == 0 else set()
        return names - {WATCH_SESSION}  # the watcher's own session (agents.watch), not an agent's

    def env_file_written() -> bool:
        return container.exec_run(["sh", "-c", "ls /home/agent/.cocoon/env | grep -q ag_"]).exit_code == 0

    # One exec writes the env file and starts the session: a large env keeps it open long enough for
    # the kill to land in it.
    params = {"sandboxId": sandbox["id"], "profile": "shell", "env": {"LARGE": "x" * 16_000_000}}
    interrupt(cocoond, "agent.spawn", params, env_file_written)

    def every_session_has_its_row() -> set[str]:
        agents = {agent["id"] for agent in cocoond.call("agent.list", {"sandboxId": sandbox["id"]})}
        assert sessions() <= agents
        return agents

    settle(every_session_has_its_row)
    params = {"sandboxId": sandbox["id"], "profile": "shell"}
    spawned = cocoond.call("agent.spawn", params)
    assert spawned["id"] in wait_until(sessions)
    assert_rows_match_engine(cocoond, docker_client)


def test_a_killed_apply_patch_leaves_all_or_nothing(start_cocoond, sandbox_image, docker_client):
    cocoond = start_cocoond()
    sandbox = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    container = docker_client.containers.get(f"{cocoond.instance}-{sandbox['id']}")
    patch = "".join(
        f"diff --git a/f{n}.txt b/f{n}.txt\nnew file mode 100644\n"
        f"--- /dev/null\n+++ b/f{n}.txt\n@@ -0,0 +1 @@\n+{n}\n"
        for n in range(FILES)
    )

    def applying() -> bool:
        return any("apply" in " ".join(process) for process in container.top()["Processes"] or [])

    interrupt(cocoond, "sandbox.apply_patch", {"sandboxId": sandbox["id"], "patch": patch}, applying)

    def files() -> int:
        command = ["sh", "-c", "ls f*.txt"]
        listed = cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": command})
        count = len(listed["stdout"].split())
        assert count in {0, FILES}, f"{count} of {FILES} files: the patch is half applied"
        return count

    if settle(files) == 0:
        assert cocoond.call("sandbox.apply_patch", {"sandboxId": sandbox["id"], "patch": patch})["applied"]
    else:  # it landed before the kill: applying it again is refused as a conflict, clearly
        again = cocoond.call("sandbox.apply_patch", {"sandboxId": sandbox["id"], "patch": patch})
        assert again["applied"] is False
        assert again["conflicts"]
    assert files() == FILES
    assert_rows_match_engine(cocoond, docker_client)


def test_a_task_killed_while_making_its_sandbox_is_taken_over_and_done(
    start_cocoond, sandbox_image, docker_client
):
    cocoond = start_cocoond()
    report = 'printf \'{"ok": true, "summary": "fine", "autoClose": true}\' > "$COCOON_REPORT_FILE"; exit'
    template = {
        "prompt": "chaos",
        "sandbox": {"network": "none", "image": sandbox_image},
        "workflow": [{"profile": "shell", "prompt": report, "timeoutS": 60}],
    }
    # task.create answers at once; the runner makes the sandbox afterwards: kill it then.
    task = cocoond.call("task.create", template)
    wait_until(a_sandbox_container(docker_client, cocoond), timeout=60, interval=0.02)
    cocoond.proc.kill()
    cocoond.proc.wait()
    cocoond.start()

    def finished() -> dict[str, Any]:
        current = cocoond.call("task.get", {"taskId": task["id"]})
        assert current["status"] not in {"queued", "running"}
        return current

    done = settle(finished, bound_s=90)
    assert done["status"] == "done", done
    assert done["attempts"] == 2
    assert len(cocoond.call("task.list")) == 1  # not run twice as two tasks

    def its_sandbox_gone() -> None:
        assert assert_rows_match_engine(cocoond, docker_client) == []

    settle(its_sandbox_gone)


def stored_overrides(cocoond) -> dict[str, Any]:
    """The settings document's row as committed (read from the database file, not through cocoond)."""
    with closing(sqlite3.connect(f"file:{cocoond.data / 'cocoon.sqlite3'}?mode=ro", uri=True)) as db:
        row = db.execute("SELECT overrides FROM cocoon_settingsdocument").fetchone()
    return json.loads(row[0]) if row else {}


def test_an_allow_killed_before_its_policy_is_published_is_published_at_the_restart(
    start_cocoond, sandbox_image, upstream
):
    cocoond = start_cocoond()
    sandbox = egress_sandbox(cocoond, upstream, sandbox_image)
    assert curl(cocoond, sandbox, "http://denied.invalid/before")[0] == 403
    # Holding the policy's lock stops the publish right after the settings change committed: the kill
    # lands exactly between the two.
    with open(cocoond.data / "egress" / "policy.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)

        def committed() -> bool:
            return "denied.invalid" in stored_overrides(cocoond).get("egress", {}).get("allowlist", [])

        cut = kill_during(cocoond, "egress.allow", {"host": "denied.invalid"}, committed)
    assert cut.interrupted
    policy = json.loads((cocoond.data / "egress" / "policy.json").read_text())
    assert "denied.invalid" not in policy["allowlist"]  # the kill came before the publish
    cocoond.start()

    def stored_and_served_agree() -> None:
        allowlist = cocoond.call("settings.get")["egress"]["allowlist"]
        assert "denied.invalid" in allowlist
        policy = json.loads((cocoond.data / "egress" / "policy.json").read_text())
        assert set(allowlist) <= set(policy["allowlist"]), policy["allowlist"]
        status = cocoond.call("egress.status")
        assert status["acknowledgedVersion"] == status["policyVersion"] == policy["version"], status

    settle(stored_and_served_agree, bound_s=15)
    assert curl(cocoond, sandbox, "http://denied.invalid/after") == (200, "upstream denied.invalid /after")
