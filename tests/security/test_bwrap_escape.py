"""Escape: a bwrap sandbox attacks the host through what cocoond does on its behalf (issue #13, 1-2).

Rule under test: no host process connects to, opens or follows anything a sandbox can write. tmux is
driven only from inside the sandbox's namespaces, and cocoond keeps no runtime folder that a sandbox
shares with the host.
"""

import contextlib
import os
import secrets
import shutil
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

from tests.conftest import Cocoond, wait_until


@pytest.fixture(scope="module")
def cocoond(tmp_path_factory):
    instance = Cocoond(data=tmp_path_factory.mktemp("bwrap-escape") / "data", env={"COCOON_DRIVER": "bwrap"})
    instance.start()
    yield instance
    for sandbox in instance.call("sandbox.list"):
        instance.post("sandbox.delete", {"sandboxId": sandbox["id"]})
    instance.stop()
    shutil.rmtree(Path("/var/lib/cocoon-bwrap") / instance.instance, ignore_errors=True)


def sh(cocoond, sandbox, script: str) -> dict:
    return cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["sh", "-c", script]})


def test_a_fake_tmux_server_cannot_make_an_attach_run_a_program_on_the_host(cocoond):
    """The sandbox puts its own tmux server where cocoon's is, with a hook that tells every client
    attaching to it to run a command (`detach-client -E`). A tmux client on the host would obey."""
    sandbox = cocoond.call("sandbox.create", {"network": "none"})
    agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 30})
    marker = Path(f"/var/tmp/cocoon-escape-{secrets.token_hex(6)}")  # writable on the host, not inside
    planted = sh(
        cocoond,
        sandbox,
        f"""
        set -e
        for socket in /run/cocoon/tmux-1000/cocoon /tmp/tmux-1000/cocoon; do
          [ -S "$socket" ] && dir=$(dirname "$socket")
        done
        cat > /tmp/evil.conf <<'CONF'
set-hook -g client-attached 'detach-client -E "touch {marker} || sleep 5"'
CONF
        tmux -S "$dir/evil" -f /tmp/evil.conf new-session -d -s keeper sleep infinity
        tmux -S "$dir/evil" new-session -d -s "{agent["id"]}" sleep infinity
        mv -f "$dir/evil" "$dir/cocoon"
        """,
    )
    assert planted["exitCode"] == 0, planted["stderr"]
    try:
        url = f"{cocoond.ws_url.removesuffix('/v1/ws')}/v1/agents/{agent['id']}/attach?token={cocoond.token}"
        with connect(url, open_timeout=10) as ws, contextlib.suppress(TimeoutError):
            ws.recv(timeout=3)
        # The hook ran, but inside the sandbox, where /var/tmp is the host's, read-only.
        with pytest.raises(TimeoutError):
            wait_until(marker.exists, timeout=3)
    finally:
        marker.unlink(missing_ok=True)


def test_a_planted_symlink_does_not_make_root_chown_a_host_folder(cocoond, tmp_path):
    """The sandbox swaps a folder that cocoond writes into for a link to a host folder."""
    victim = Path(f"/var/tmp/cocoon-victim-{secrets.token_hex(6)}")
    victim.mkdir(mode=0o755)
    try:
        sandbox = cocoond.call("sandbox.create", {"network": "none"})
        # In the background: the exec that plants the link must not pull its own folder away first.
        plant = f"rm -rf /run/cocoon/exec; ln -s {victim} /run/cocoon/exec"
        sh(cocoond, sandbox, f"(sleep 1; {plant}) >/dev/null 2>&1 &")
        time.sleep(2)
        for _ in range(2):  # on the old code these failed (its exec folder was gone): their answer is moot
            cocoond.post("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["true"], "timeoutS": 3})
        owner = victim.stat()
        assert (owner.st_uid, owner.st_gid) == (0, 0)
        assert list(victim.iterdir()) == []
    finally:
        shutil.rmtree(victim, ignore_errors=True)


def test_no_host_process_holds_a_path_inside_a_sandbox(cocoond):
    """No tmux client or server of the host is pointed at a socket in a folder a sandbox can write."""
    sandbox = cocoond.call("sandbox.create", {"network": "none"})
    cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
    assert not Path("/run/cocoon", cocoond.instance, sandbox["id"]).exists()
    own_namespace = os.readlink("/proc/self/ns/mnt")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            namespace = os.readlink(f"/proc/{pid}/ns/mnt")
        except OSError:
            continue
        if command and command[0].endswith(b"tmux") and namespace == own_namespace:
            assert b"-S" not in command, command
