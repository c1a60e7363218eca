"""The Podman driver, through Podman's Docker-compatible API on a socket of our own (SPEC §3)."""

import shutil
import socket
import subprocess

import pytest

from tests.conftest import ROOT, wait_until
from tests.test_watch import hook_latencies, spawn_idle, start_watched


def acknowledged(status: dict) -> bool:
    return status["acknowledgedVersion"] == status["policyVersion"]


@pytest.fixture(scope="module")
def podman_socket(tmp_path_factory, sandbox_image):
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: run scripts/provision")
    subprocess.run([str(ROOT / "scripts/seed-base-image"), "podman"], check=True)
    path = tmp_path_factory.mktemp("podman") / "podman.sock"
    service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{path}"])
    wait_until(path.exists, timeout=30)
    yield path
    service.terminate()
    service.wait(timeout=30)


@pytest.fixture(scope="module")
def podman_cocoond(tmp_path_factory, podman_socket):
    # Watched as tests/test_watch.py's: a tick of a minute, so a status within seconds was pushed.
    instance = start_watched(
        tmp_path_factory.mktemp("podman"), COCOON_DRIVER="podman", CONTAINER_HOST=f"unix://{podman_socket}"
    )
    yield instance
    for sandbox in instance.call("sandbox.list"):
        instance.post("sandbox.delete", {"sandboxId": sandbox["id"]})
    instance.stop()
    for kind in ("container", "network", "volume"):
        names = subprocess.run(
            ["podman", kind, "ls", "-q", "--filter", f"label=io.cocoon.instance={instance.instance}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        if names:
            subprocess.run(["podman", kind, "rm", "-f", *names], capture_output=True)


def run(instance, sandbox, *command):
    return instance.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": list(command)})


@pytest.mark.e2e
def assert_fenced(instance, sandbox) -> None:
    """Issue #39: a Podman sandbox's open network is fenced as Docker's (its rules hooked into FORWARD
    where there is no DOCKER-USER): a host service on its bridge's gateway is refused."""

    def fence_ok() -> bool:
        items = {item["key"]: item for item in instance.call("system.setup_status")["items"]}
        return items["openFence"]["ok"]

    wait_until(fence_ok, timeout=300)
    [ip] = sandbox["ips"].values()
    gateway = ip.rsplit(".", 1)[0] + ".1"
    with socket.create_server(("0.0.0.0", 0)) as listener:
        port = listener.getsockname()[1]
        with socket.create_connection((gateway, port), timeout=3):
            pass  # a host address, reached from the host
        probe = f"timeout 3 bash -c 'echo > /dev/tcp/{gateway}/{port}' 2>&1 && echo reached"
        assert "reached" not in run(instance, sandbox, "bash", "-c", probe)["stdout"]


def test_podman_builds_the_image_and_runs_hardened_sandboxes(podman_cocoond):
    info = podman_cocoond.call("system.info")
    assert info["driverKind"] == "podman"
    with podman_cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["image.build"]})
        podman_cocoond.call("image.build", {"variant": "base"})
        status = None
        while status not in {"done", "failed"}:
            status = ws.next_event(timeout=600)["event"]["data"]["status"]
    assert status == "done"

    for network, interfaces in (("none", 1), ("egress", 2), ("open", 2)):
        sandbox = podman_cocoond.call("sandbox.create", {"network": network, "limits": {"pids": 128}})
        assert run(podman_cocoond, sandbox, "id")["stdout"].startswith("uid=1000(agent)")
        status = run(podman_cocoond, sandbox, "cat", "/proc/self/status")["stdout"]
        assert "CapEff:\t0000000000000000" in status
        assert "NoNewPrivs:\t1" in status
        assert run(podman_cocoond, sandbox, "cat", "/proc/net/dev")["stdout"].count(":") == interfaces
        head = run(podman_cocoond, sandbox, "git", "rev-parse", "HEAD")["stdout"]
        assert run(podman_cocoond, sandbox, "git", "rev-parse", "cocoon-baseline^{commit}")["stdout"] == head
        if network == "open":
            assert_fenced(podman_cocoond, sandbox)
        if network == "none":
            agent = spawn_idle(podman_cocoond, sandbox)
            assert max(hook_latencies(podman_cocoond, sandbox, agent, ["blocked", "done"])) < 2
        assert podman_cocoond.call("sandbox.stop", {"sandboxId": sandbox["id"]})["state"] == "stopped"
        assert podman_cocoond.call("sandbox.start", {"sandboxId": sandbox["id"]})["state"] == "running"
        podman_cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})
    # The egress sandbox brought up the egress proxy, as a Podman container too.
    assert podman_cocoond.call("egress.status")["running"] is True
    # A delete publishes the smaller policy without waiting for the ack; the proxy confirms it soon.
    wait_until(lambda: acknowledged(podman_cocoond.call("egress.status")), timeout=10)
    ours = [f"label=io.cocoon.instance={podman_cocoond.instance}", "label=io.cocoon.kind=sandbox"]
    leftovers = subprocess.run(
        ["podman", "ps", "-aq", "--filter", ours[0], "--filter", ours[1]],
        capture_output=True,
        text=True,
    ).stdout
    assert leftovers == ""
