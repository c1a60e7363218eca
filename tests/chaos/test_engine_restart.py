"""Chaos (issue #14): dockerd restarts while agents work. With live-restore, sandboxes and agents run on
untouched; without it, the sandboxes come back by their restart policy, agents whose profile can resume
are resumed and the others end with engine_restarted, their last screen kept. Either way a sandbox's
workspace is kept and cocoond serves on.

The engine restarted is a dockerd of the test's own (own socket, data root, exec root and containerd),
so the machine's engine, which other tests use, is never restarted."""

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest

from tests.chaos.faults import assert_rows_match_engine, settle
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e


BRIDGE, BRIDGE_ADDRESS = "cc-chaos0", "10.212.0.1/24"


class PrivateDockerd:
    """A dockerd on a socket of its own, restartable with or without live-restore."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = f"unix://{root}/docker.sock"
        self.process: subprocess.Popen | None = None

    def start(self, live_restore: bool) -> docker.DockerClient:
        if not _link_exists(BRIDGE):
            subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True)
            subprocess.run(["ip", "addr", "add", BRIDGE_ADDRESS, "dev", BRIDGE], check=True)
        config = {
            "live-restore": live_restore,
            "data-root": str(self.root / "data"),
            "exec-root": str(self.root / "exec"),
            "pidfile": str(self.root / "dockerd.pid"),
            "hosts": [self.socket],
            # A default bridge of its own and no iptables rules: the machine's engine owns docker0 and
            # the rules. dockerd deletes the host's docker0 when it has no bridge ("none"), and on a
            # restart without live-restore when it has default-address-pools: so neither is set here.
            "bridge": BRIDGE,
            "iptables": False,
            "ip6tables": False,
            "containerd-namespace": "cocoon-chaos",
            "containerd-plugins-namespace": "cocoon-chaos-plugins",
        }
        (self.root / "daemon.json").write_text(json.dumps(config))
        log = (self.root / "dockerd.log").open("ab")
        self.process = subprocess.Popen(
            ["dockerd", "--config-file", str(self.root / "daemon.json")], stdout=log, stderr=log
        )
        return wait_until(self._client, timeout=60, interval=0.2)

    def _client(self) -> docker.DockerClient | None:
        try:  # the client asks the engine for its API version as it is made
            client = docker.DockerClient(base_url=self.socket, timeout=60)
            return client if client.ping() else None
        except Exception:
            return None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=60)
            self.process = None


@pytest.fixture(scope="module")
def engine(docker_client, sandbox_image) -> Iterator[PrivateDockerd]:
    root = Path(tempfile.mkdtemp(prefix="cocoon-chaos-dockerd-", dir="/var/tmp"))
    engine = PrivateDockerd(root)
    had_docker0 = _link_exists("docker0")
    try:
        client = engine.start(live_restore=True)
        # The sandbox image, from the machine's engine (no registry here).
        client.images.load(b"".join(docker_client.api.get_image(sandbox_image)))
        yield engine
    finally:
        client = engine._client() if engine.process else None
        if client is not None:
            for container in client.containers.list(all=True):
                container.remove(force=True, v=True)
        engine.stop()
        # dockerd leaves its data root mounted on itself.
        subprocess.run(["umount", "--recursive", "--lazy", str(root / "data")], capture_output=True)
        shutil.rmtree(root)
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
    # The machine's engine builds images on docker0: a private engine must leave it alone.
    assert _link_exists("docker0") or not had_docker0


def _link_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def restart(engine: PrivateDockerd, live_restore: bool) -> docker.DockerClient:
    engine.stop()
    return engine.start(live_restore)


def shows(cocoond, agent: dict, text: str) -> bool:
    answer = cocoond.post("agent.read", {"agentId": agent["id"]}).json()
    return text in answer.get("result", {}).get("screen", "")


def agent_row(cocoond, agent: dict) -> dict:
    return next(row for row in cocoond.call("agent.list") if row["id"] == agent["id"])


def spawn_idle(cocoond, sandbox: dict, prompt: str, profile: str = "shell") -> dict:
    agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": profile, "prompt": prompt})
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 30})
    return agent


def test_with_live_restore_agents_work_on_through_a_dockerd_restart(engine, start_cocoond, sandbox_image):
    client = restart(engine, live_restore=True)
    assert client.info()["LiveRestoreEnabled"] is True
    cocoond = start_cocoond(env={"DOCKER_HOST": engine.socket})
    items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
    assert items["liveRestore"]["ok"] is True
    sandbox = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    # A program that keeps running, and a screen that must still be the same one afterwards.
    agent = spawn_idle(
        cocoond,
        sandbox,
        # Each beat replaces the file whole, so a `cat` never reads one half written.
        "echo before-restart; (while sleep 0.2; do date +%s%N > /tmp/b && mv /tmp/b /tmp/beat; done &)",
    )
    beat = ["cat", "/tmp/beat"]
    # The first beat comes 0.2 s after the loop starts: read before it, there was no file ("" in CI).
    first = settle(lambda: _exec_ok(cocoond, sandbox, beat))

    restart(engine, live_restore=True)

    after = settle(lambda: _exec_ok(cocoond, sandbox, beat))
    assert int(after) > int(first)  # the loop ran on: the same processes, never restarted
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": "echo after-restart"})
    wait_until(lambda: shows(cocoond, agent, "\nafter-restart"))
    assert shows(cocoond, agent, "\nbefore-restart")  # the same session, its screen intact
    row = agent_row(cocoond, agent)
    assert row["status"] != "exited"
    keys = [entry["key"] for entry in cocoond.call("activity.list", {"agentId": agent["id"]})]
    assert "agent.resumed" not in keys
    assert_rows_match_engine(cocoond, client)
    cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})


def _exec_ok(cocoond, sandbox: dict, command: list[str]) -> str:
    answer = cocoond.post("sandbox.exec", {"sandboxId": sandbox["id"], "command": command}).json()
    assert "result" in answer, answer
    assert answer["result"]["exitCode"] == 0, answer
    return answer["result"]["stdout"]


def test_without_live_restore_sandboxes_come_back_and_agents_resume_or_say_why_not(
    engine, start_cocoond, sandbox_image
):
    client = restart(engine, live_restore=False)
    cocoond = start_cocoond(env={"DOCKER_HOST": engine.socket})
    items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
    assert items["liveRestore"]["ok"] is False
    assert "live-restore" in items["liveRestore"]["detail"]
    cocoond.call(
        "profile.create",
        {"name": "resumable", "command": ["bash"], "resumeCommand": ["sh", "-c", "echo resumed; exec bash"]},
    )
    sandbox = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    plain = spawn_idle(cocoond, sandbox, "echo plain-before")
    resuming = spawn_idle(cocoond, sandbox, "echo resuming-before", profile="resumable")

    client = restart(engine, live_restore=False)

    # The container comes back by its restart policy; the plain agent ends, the other resumes.
    wait_until(lambda: agent_row(cocoond, plain)["status"] == "exited", timeout=60)
    row = agent_row(cocoond, plain)
    assert (row["exitReason"], row["exitCode"]) == ("engine_restarted", None)
    read = cocoond.call("agent.read", {"agentId": plain["id"]})
    assert read["lastKnown"] is True
    assert "\nplain-before" in read["screen"]
    wait_until(lambda: shows(cocoond, resuming, "resumed"), timeout=60)  # its resume command's output
    assert agent_row(cocoond, resuming)["status"] != "exited"
    # Nothing lost, nothing left over, and the engine takes new work.
    settle(lambda: assert_rows_match_engine(cocoond, client))
    another = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    assert _exec_ok(cocoond, another, ["echo", "ok"]) == "ok\n"
    for made in (sandbox, another):
        cocoond.call("sandbox.delete", {"sandboxId": made["id"]})


@pytest.mark.parametrize("live_restore", [True, False], ids=["live-restore", "no-live-restore"])
def test_a_sandbox_comes_back_with_its_workspace_after_a_dockerd_restart(
    engine, start_cocoond, sandbox_image, live_restore
):
    restart(engine, live_restore)
    cocoond = start_cocoond(env={"DOCKER_HOST": engine.socket})
    sandbox = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    _exec_ok(cocoond, sandbox, ["bash", "-c", "echo survived > proof.txt"])

    client = restart(engine, live_restore)

    container = client.containers.get(f"{cocoond.instance}-{sandbox['id']}")

    def running() -> bool:
        container.reload()
        return container.status == "running"

    wait_until(running, timeout=60)
    assert settle(lambda: _exec_ok(cocoond, sandbox, ["cat", "proof.txt"])) == "survived\n"
    assert httpx.get(f"{cocoond.url}/healthz").status_code == 200
    cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})
