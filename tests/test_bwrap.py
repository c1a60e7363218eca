"""The bubblewrap driver, through a live cocoond with COCOON_DRIVER=bwrap (SPEC §3)."""

import json
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
from websockets.sync.client import connect

from tests.conftest import Cocoond, wait_until


@pytest.fixture(scope="module")
def bwrap_cocoond(tmp_path_factory):
    instance = Cocoond(data=tmp_path_factory.mktemp("bwrap") / "data", env={"COCOON_DRIVER": "bwrap"}).start()
    yield instance
    for sandbox in instance.call("sandbox.list"):
        instance.post("sandbox.delete", {"sandboxId": sandbox["id"]})
    instance.stop()
    shutil.rmtree(Path("/var/lib/cocoon-bwrap") / instance.instance, ignore_errors=True)


def run(instance, sandbox, *command, **params):
    return instance.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": list(command), **params})


def folder(instance, sandbox) -> Path:
    return Path("/var/lib/cocoon-bwrap") / instance.instance / "sandboxes" / sandbox["id"]


def test_system_info_reports_bwrap_without_images_or_limits(bwrap_cocoond):
    info = bwrap_cocoond.call("system.info")
    assert info["driverKind"] == "bwrap"
    assert "images" not in info["capabilities"]
    assert "resourceLimits" not in info["capabilities"]


def test_a_bwrap_sandbox_is_isolated(bwrap_cocoond):
    sandbox = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    assert sandbox["state"] == "running"
    assert run(bwrap_cocoond, sandbox, "id")["stdout"].startswith("uid=1000(agent) gid=1000(agent)")
    status = run(bwrap_cocoond, sandbox, "cat", "/proc/self/status")["stdout"]
    for capabilities in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert f"{capabilities}:\t0000000000000000" in status
    assert "NoNewPrivs:\t1" in status
    # An exec enters the sandbox's namespaces and so gets a full bounding set there (nsenter resets it),
    # but can use none of it; the sandbox's own processes have none at all.
    assert "CapBnd:\t0000000000000000" in run(bwrap_cocoond, sandbox, "cat", "/proc/1/status")["stdout"]
    # Own PID namespace: only the sandbox's few processes, none of the host's.
    pids = [name for name in run(bwrap_cocoond, sandbox, "ls", "/proc")["stdout"].split() if name.isdigit()]
    assert len(pids) < 15
    assert run(bwrap_cocoond, sandbox, "cat", "/proc/1/cmdline")["stdout"].startswith("bwrap")
    # The host is read-only, and cocoon's data, secrets and root's files are out of sight.
    for path in ("/usr/pwned", "/etc/pwned", "/var/pwned", "/opt/cocoon/bin/pwned"):
        assert run(bwrap_cocoond, sandbox, "touch", path)["exitCode"] != 0, path
    assert run(bwrap_cocoond, sandbox, "cat", str(bwrap_cocoond.data / "admin-token.txt"))["exitCode"] != 0
    assert run(bwrap_cocoond, sandbox, "cat", "/etc/shadow")["exitCode"] != 0
    assert run(bwrap_cocoond, sandbox, "test", "-e", "/var/run/docker.sock")["exitCode"] != 0
    # network none: loopback only.
    assert run(bwrap_cocoond, sandbox, "cat", "/proc/net/dev")["stdout"].count(":") == 1
    head = run(bwrap_cocoond, sandbox, "git", "rev-parse", "HEAD")["stdout"]
    assert run(bwrap_cocoond, sandbox, "git", "rev-parse", "cocoon-baseline^{commit}")["stdout"] == head


def test_sandboxes_cannot_see_each_other(bwrap_cocoond):
    first = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    second = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    run(bwrap_cocoond, first, "sh", "-c", "echo private > secret.txt")
    peek = run(bwrap_cocoond, second, "cat", str(folder(bwrap_cocoond, first) / "workspace" / "secret.txt"))
    assert peek["exitCode"] != 0
    assert "private" not in peek["stdout"]


def test_files_persist_in_the_sandbox_folder_across_stop_start(bwrap_cocoond):
    sandbox = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    run(bwrap_cocoond, sandbox, "sh", "-c", "echo kept > notes.txt")
    assert (folder(bwrap_cocoond, sandbox) / "workspace" / "notes.txt").read_text() == "kept\n"
    assert bwrap_cocoond.call("sandbox.stop", {"sandboxId": sandbox["id"]})["state"] == "stopped"
    assert bwrap_cocoond.call("sandbox.start", {"sandboxId": sandbox["id"]})["state"] == "running"
    assert run(bwrap_cocoond, sandbox, "cat", "notes.txt")["stdout"] == "kept\n"


def test_no_bwrap_option_is_visible_in_ps(bwrap_cocoond):
    sandbox = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    commands = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    keepers = [line for line in commands.splitlines() if line.startswith("bwrap")]
    assert keepers
    for line in keepers:
        assert "--bind" not in line
        assert "--unshare" not in line
        assert sandbox["id"] not in line


def test_bwrap_sandboxes_survive_a_cocoond_restart(bwrap_cocoond):
    sandbox = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    run(bwrap_cocoond, sandbox, "sh", "-c", "sleep 300 >/dev/null 2>&1 &")
    bwrap_cocoond.restart()
    assert bwrap_cocoond.call("sandbox.get", {"sandboxId": sandbox["id"]})["state"] == "running"
    assert "sleep 300" in run(bwrap_cocoond, sandbox, "ps", "-eo", "args")["stdout"]


def test_a_deleted_bwrap_sandbox_leaves_no_folder_and_no_process(bwrap_cocoond):
    sandbox = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    path = folder(bwrap_cocoond, sandbox)
    assert path.is_dir()
    bwrap_cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})
    assert not path.exists()
    assert not Path("/run/cocoon", bwrap_cocoond.instance, sandbox["id"]).exists()


@pytest.mark.e2e
def test_the_toolbox_reaches_bwrap_sandboxes_read_only(bwrap_cocoond):
    with bwrap_cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["toolbox.install"]})
        bwrap_cocoond.call("toolbox.install")
        status = None
        while status not in {"done", "failed"}:
            status = ws.next_event(timeout=900)["event"]["data"]["status"]
    assert status == "done"
    assert bwrap_cocoond.call("toolbox.status")["installed"] is True
    sandbox = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    assert run(bwrap_cocoond, sandbox, "node", "--version")["stdout"].startswith("v22.")
    assert run(bwrap_cocoond, sandbox, "claude", "--version")["exitCode"] == 0
    assert run(bwrap_cocoond, sandbox, "touch", "/opt/agents/tampered")["exitCode"] != 0


def test_nothing_of_cocoonds_environment_reaches_a_bwrap_sandbox(bwrap_cocoond):
    sandbox = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    environment = run(bwrap_cocoond, sandbox, "env")["stdout"]
    assert "COCOON_" not in environment
    assert "DJANGO_SETTINGS_MODULE" not in environment
    assert "/root" not in environment
    assert "PATH=/opt/cocoon/bin:/opt/agents/bin:" in environment


def test_stop_ends_every_process_of_the_sandbox(bwrap_cocoond):
    sandbox = bwrap_cocoond.call("sandbox.create", {"network": "none"})
    run(bwrap_cocoond, sandbox, "sh", "-c", "sleep 1234 >/dev/null 2>&1 &")
    assert "sleep 1234" in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    bwrap_cocoond.call("sandbox.stop", {"sandboxId": sandbox["id"]})
    wait_until(
        lambda: (
            "sleep 1234" not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        ),
        timeout=10,
    )
    keepers = subprocess.run(["pgrep", "-f", "bwrap --args"], capture_output=True, text=True).stdout.split()
    bwrap_cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})
    assert all(Path(f"/proc/{pid}").exists() for pid in keepers)  # the other sandboxes' keepers live on


def test_egress_goes_through_a_local_proxy_configured_but_not_enforced(bwrap_cocoond, tmp_path):
    from tests.upstream import NAMES, STANDIN_KEY, public_upstream

    cocoond = bwrap_cocoond
    with public_upstream(tmp_path) as upstream:
        cocoond.call(
            "settings.update",
            {
                "egress": {
                    "allowlist": ["allowed.invalid"],
                    "hosts": {name: upstream.address for name in NAMES},
                },
                "providers": {"standin": {"kind": "http", "baseUrl": "http://llm.invalid", "secret": "K"}},
            },
        )
        cocoond.call("secrets.set", {"name": "K", "value": STANDIN_KEY})
        items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
        assert "not enforced" in items["egressProxy"]["detail"]
        sandbox = cocoond.call("sandbox.create", {"network": "egress"})

        def sh(script):
            return run(cocoond, sandbox, "bash", "-c", script)["stdout"]

        assert sh("echo $HTTP_PROXY").startswith("http://127.0.0.1:")
        assert sh("curl -sS http://allowed.invalid/local") == "upstream allowed.invalid /local"
        denied = sh("curl -sS -o /dev/null -w '%{http_code}' http://denied.invalid/")
        assert denied == "403"
        wait_until(lambda: [r for r in cocoond.call("egress.denied") if r["host"] == "denied.invalid"])

        # Providers through the local credential proxy, keyed by the placeholder's sandbox token.
        agent = cocoond.call(
            "agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell", "providers": ["standin"]}
        )
        cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 20})
        command = (
            'curl -sS -H "Authorization: Bearer $STANDIN_API_KEY" "$STANDIN_BASE_URL/v1/x" > /tmp/r; '
            'echo "$STANDIN_BASE_URL" > /tmp/base; touch /tmp/r.done'
        )
        cocoond.call("agent.send_input", {"agentId": agent["id"], "text": command})
        wait_until(lambda: run(cocoond, sandbox, "test", "-e", "/tmp/r.done")["exitCode"] == 0)
        assert sh("cat /tmp/r") == "upstream llm.invalid /v1/x"
        [request] = [r for r in upstream.requests() if r["path"] == "/v1/x"]
        assert dict(request["headers"])["authorization"] == f"Bearer {STANDIN_KEY}"
        forged = "cocoon_0123456789abcdef0123456789abcdef_K"
        answer = sh(f"curl -sS -H 'Authorization: Bearer {forged}' \"$(cat /tmp/base)/v1/y\"")
        assert json.loads(answer)["error"]["code"] == "no_grant"

        # Not enforced: the host's network is the sandbox's, so going around the proxy works.
        assert (
            sh(f"curl -sS --noproxy '*' http://{upstream.address}/around")
            == f"upstream {upstream.address} /around"
        )
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        cocoond.call("settings.reset", {"keys": ["egress", "providers"]})


def test_an_agent_runs_works_is_attached_and_exits_in_a_bwrap_sandbox(bwrap_cocoond):
    cocoond = bwrap_cocoond
    sandbox = cocoond.call("sandbox.create", {"network": "none"})
    agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell", "prompt": "sleep 3"})

    def wait(*until):
        return cocoond.call("agent.wait", {"agentId": agent["id"], "until": list(until), "timeoutS": 30})

    assert wait("working")["status"] == "working"
    assert wait("idle")["status"] == "idle"
    url = f"ws://127.0.0.1:{cocoond.port}/v1/agents/{agent['id']}/attach?token={cocoond.token}"
    with connect(url, open_timeout=10) as ws:
        ws.send(b"echo hi-$((40+2))\r")
        seen = b""
        while b"hi-42" not in seen:
            seen += ws.recv(timeout=10)
    assert "hi-42" in cocoond.call("agent.read", {"agentId": agent["id"]})["screen"]
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": "exit 3"})
    exited = wait("exited")
    assert (exited["status"], exited["exitCode"]) == ("exited", 3)


def test_a_bwrap_root_another_data_directory_left_keeps_its_sandboxes_and_only_its_waiting_members(tmp_path):
    """Root's bwrap folders live outside the data directory (issue #38): a cocoond on a new one under the
    same instance name must tell the old one's sandboxes from its own orphans, as on Docker."""
    name = f"cocoontestbw{secrets.token_hex(3)}"
    env = {"COCOON_DRIVER": "bwrap", "COCOON_INSTANCE": name}
    for each in ("x", "y"):
        (tmp_path / each).mkdir()
    old = Cocoond(data=tmp_path / "x" / "data", env=env).start()
    try:
        old.call("settings.update", {"sandbox": {"pools": [{"size": 1, "network": "none"}], "poolCap": 1}})
        wait_until(lambda: old.call("system.info")["pool"]["ready"] == 1, timeout=60, interval=0.2)
        claimed = old.call("sandbox.create", {"network": "none"})
        run(old, claimed, "sh", "-c", "echo mine > note.txt")
        wait_until(lambda: old.call("system.info")["pool"]["ready"] == 1, timeout=60, interval=0.2)
        root = Path("/var/lib/cocoon-bwrap") / name / "sandboxes"
        waiting = {entry.name for entry in root.iterdir()} - {claimed["id"]}
        assert len(waiting) == 1
        old.stop()
        shutil.rmtree(old.data.parent)

        new = Cocoond(data=tmp_path / "y" / "data", env=env).start()
        try:
            assert {entry.name for entry in root.iterdir()} == {claimed["id"]}
            assert [each["sandboxId"] for each in new.call("engine.foreign")] == [claimed["id"]]
            adopted = new.call("engine.adopt", {"sandboxId": claimed["id"]})
            assert (adopted["name"], adopted["network"], adopted["driver"]) == (
                claimed["id"],
                "none",
                "bwrap",
            )
            assert run(new, adopted, "cat", "note.txt")["stdout"] == "mine\n"
            assert new.call("engine.foreign") == []
            new.call("sandbox.delete", {"sandboxId": claimed["id"]})
        finally:
            new.stop()
    finally:
        old.stop()
        shutil.rmtree(Path("/var/lib/cocoon-bwrap") / name, ignore_errors=True)
