"""settings.sandbox.readOnlyRoot: an attacker inside the sandbox, even as root in it, cannot change the
image's files; the agent still has /workspace, its home, /tmp and its status files (SPEC §3)."""

import subprocess

import pytest

from tests import test_podman
from tests.conftest import wait_until

READ_ONLY = "Read-only file system"
WRITABLE = ["/workspace/w", "$HOME/h", "/tmp/t", "/opt/cocoon/status/s"]
WRITE_EACH = " && ".join(f"echo ok > {path} && cat {path}" for path in WRITABLE)
# A Podman service and a cocoond on it, as tests/test_podman.py makes them.
podman_socket, podman_cocoond = test_podman.podman_socket, test_podman.podman_cocoond


# Once on Docker's default runtime and once on gVisor, which provision installs (test_runsc.py).
@pytest.fixture(scope="module", params=["", "runsc"], ids=["runc", "runsc"])
def sandbox(request, cocoond, sandbox_image):
    cocoond.call("settings.update", {"sandbox": {"readOnlyRoot": True}})
    try:
        created = cocoond.call(
            "sandbox.create", {"network": "none", "image": sandbox_image, "runtime": request.param}
        )
    finally:
        cocoond.call("settings.reset", {"keys": ["sandbox.readOnlyRoot"]})
    yield created
    cocoond.post("sandbox.delete", {"sandboxId": created["id"]})


def sh(cocoond, sandbox, script):
    return cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["sh", "-c", script]})


def as_root(cocoond, docker_client, sandbox, script):
    """root inside the container: the owner of /usr and /etc, who could write them on a writable root."""
    container = docker_client.containers.get(f"{cocoond.instance}-{sandbox['id']}")
    code, output = container.exec_run(["sh", "-c", script], user="root")
    return code, output.decode()


@pytest.mark.e2e
@pytest.mark.parametrize("path", ["/usr/bin/planted", "/etc/planted", "/opt/planted", "/etc/passwd"])
def test_root_in_the_sandbox_cannot_write_the_image(cocoond, docker_client, sandbox, path):
    code, output = as_root(cocoond, docker_client, sandbox, f"echo x >> {path}")
    assert code != 0
    assert READ_ONLY in output
    assert READ_ONLY in sh(cocoond, sandbox, f"echo x >> /var/tmp/planted; echo x >> {path}")["stderr"]


@pytest.mark.e2e
def test_the_agent_keeps_its_writable_places_and_they_survive_a_restart(cocoond, sandbox):
    result = sh(cocoond, sandbox, WRITE_EACH)
    assert (result["exitCode"], result["stdout"]) == (0, "ok\n" * len(WRITABLE)), result
    # The home holds the image's dotfiles and is the agent's own, kept across stop and start.
    assert sh(cocoond, sandbox, "test -O $HOME && test -f $HOME/.bashrc && echo own")["stdout"] == "own\n"
    cocoond.call("sandbox.stop", {"sandboxId": sandbox["id"]})
    cocoond.call("sandbox.start", {"sandboxId": sandbox["id"]})
    assert sh(cocoond, sandbox, "cat /workspace/w $HOME/h")["stdout"] == "ok\nok\n"


@pytest.mark.e2e
def test_a_shell_agent_spawns_answers_and_reports_its_exit(cocoond, sandbox):
    agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 60})
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": "echo marker-$((6*7))"})

    def answered():
        return "marker-42" in cocoond.call("agent.read", {"agentId": agent["id"]})["screen"]

    wait_until(answered, timeout=30, interval=0.5)
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": "exit 3"})
    exited = cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["exited"], "timeoutS": 60})
    assert exited["exitCode"] == 3  # written to /opt/cocoon/status by the agent's wrapper


@pytest.mark.e2e
def test_podman_sandboxes_get_the_same_read_only_root(podman_cocoond, sandbox_image):
    # The image built for Docker, copied into Podman's store: no second build.
    subprocess.run(f"docker save {sandbox_image} | podman load -q", shell=True, check=True)
    podman_cocoond.call("settings.update", {"sandbox": {"readOnlyRoot": True}})
    sandbox = podman_cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    container = f"{podman_cocoond.instance}-{sandbox['id']}"
    try:
        as_root = subprocess.run(
            ["podman", "exec", "--user", "root", container, "sh", "-c", "echo x >> /usr/bin/planted"],
            capture_output=True,
            text=True,
        )
        assert READ_ONLY in as_root.stderr
        result = sh(podman_cocoond, sandbox, WRITE_EACH)
        assert (result["exitCode"], result["stdout"]) == (0, "ok\n" * len(WRITABLE)), result
    finally:
        podman_cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        subprocess.run(["podman", "rmi", sandbox_image], capture_output=True)
