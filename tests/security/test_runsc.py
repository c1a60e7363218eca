"""gVisor for real: provision installs runsc and registers it with the engine, and a runsc sandbox in
every network mode runs hardened under gVisor's kernel, execs, runs a tmux agent and keeps its network
confinement, although runsc runs with --network=host (the container's namespace, not the host's).

Not skipped where runsc is missing: scripts/provision is responsible for it, so its absence fails."""

import pytest

from tests.conftest import wait_until
from tests.test_agents import attach, read_until
from tests.test_egress import curl, recorded
from tests.test_sandboxes import interfaces, reaches, run

pytestmark = pytest.mark.e2e
MODES = ["none", "egress", "open"]


@pytest.fixture(scope="module")
def sandboxes(cocoond, sandbox_image, upstream):
    """One runsc sandbox per network mode; the egress one may reach allowed.invalid (the stand-in)."""
    info = cocoond.call("system.info")
    assert "runsc" in info["runtimes"], f"the engine offers no runsc ({info}): run scripts/provision"
    cocoond.call(
        "settings.update",
        {"egress": {"allowlist": ["allowed.invalid"], "hosts": {"allowed.invalid": upstream.address}}},
    )
    created = {}
    try:
        for mode in MODES:
            created[mode] = cocoond.call(
                "sandbox.create", {"network": mode, "image": sandbox_image, "runtime": "runsc"}
            )
        yield created
    finally:
        for sandbox in created.values():
            cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        cocoond.call("settings.reset", {"keys": ["egress"]})


@pytest.mark.parametrize("mode", MODES)
def test_a_runsc_sandbox_runs_hardened_under_gvisor(cocoond, docker_client, sandboxes, mode):
    sandbox = sandboxes[mode]
    assert (sandbox["state"], sandbox["runtime"]) == ("running", "runsc")
    container = docker_client.containers.get(f"{cocoond.instance}-{sandbox['id']}")
    assert container.attrs["HostConfig"]["Runtime"] == "runsc"
    # gVisor's own kernel answers, not the host's.
    assert "gVisor" in run(cocoond, sandbox, "dmesg")["stdout"]
    assert run(cocoond, sandbox, "id")["stdout"].startswith("uid=1000(agent)")
    status = run(cocoond, sandbox, "cat", "/proc/self/status")["stdout"]
    assert "CapEff:\t0000000000000000" in status
    assert "no_new_privs: 1" in run(cocoond, sandbox, "setpriv", "--dump")["stdout"]
    # --network=host means the container's namespace: cocoond on the host's loopback is out of reach.
    assert not reaches(cocoond, sandbox, "127.0.0.1", cocoond.port)


@pytest.mark.parametrize("mode", MODES)
def test_a_shell_agent_runs_in_tmux_under_runsc(cocoond, sandboxes, mode):
    agent = cocoond.call("agent.spawn", {"sandboxId": sandboxes[mode]["id"], "profile": "shell"})
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 60})
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": "echo runsc-$((6*7))"})
    wait_until(
        lambda: "runsc-42" in cocoond.call("agent.read", {"agentId": agent["id"]})["screen"],
        timeout=30,
        interval=0.5,
    )
    with attach(cocoond, agent) as terminal:  # the browser terminal: a TTY exec into gVisor
        terminal.send(b"echo typed-$((40+2))\r")
        assert b"typed-42" in read_until(terminal, b"typed-42", timeout=30)
    cocoond.call("agent.kill", {"agentId": agent["id"]})


def test_an_egress_runsc_sandbox_goes_out_only_through_the_proxy(cocoond, sandboxes, upstream):
    sandbox = sandboxes["egress"]
    upstream.clear()
    assert curl(cocoond, sandbox, "http://allowed.invalid/runsc") == (200, "upstream allowed.invalid /runsc")
    assert curl(cocoond, sandbox, "http://denied.invalid/runsc")[0] == 403
    assert not reaches(cocoond, sandbox, upstream.address, 80)
    assert [request["path"] for request in recorded(upstream)] == ["/runsc"]


def test_network_modes_keep_their_shape_under_runsc(cocoond, sandboxes, outside_host):
    assert interfaces(cocoond, sandboxes["none"]) == ["lo"]
    assert not reaches(cocoond, sandboxes["none"], *outside_host)
    assert reaches(cocoond, sandboxes["open"], *outside_host)


def test_files_and_diff_work_under_runsc(cocoond, sandboxes):
    sandbox = sandboxes["none"]

    def files(method, **params):
        return cocoond.post(f"files.{method}", {"sandboxId": sandbox["id"], **params}).json()

    files("write", path="/workspace/a.txt", content="hi\n")
    assert files("read", path="/workspace/a.txt")["result"]["content"] == "hi\n"
    assert "a.txt" in [entry["name"] for entry in files("list", path="/workspace")["result"]["entries"]]
    # The size check before a read still holds (it used coreutils stat, which failed on gVisor).
    run(cocoond, sandbox, "truncate", "-s", "4M", "/workspace/big")
    assert "larger than the limit" in files("read", path="/workspace/big")["error"]["message"]
    diff = cocoond.call("sandbox.diff", {"sandboxId": sandbox["id"]})
    assert sorted(entry["path"] for entry in diff["files"]) == ["a.txt", "big"]
