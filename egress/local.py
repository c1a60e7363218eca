"""The egress proxy as a local process, for drivers that cannot enforce egress (bwrap): sandboxes
share the host's network, so the proxy is offered, not forced — egress is configured, not enforced.

One process per cocoon instance, a child of the cocoond (or worker) that started it; it ends when that
parent does. Its ports are kept in DATA_DIR/egress/local.json.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings

from cocoon.datadir import write_private_file
from egress import policy
from egress.policy import LOOPBACK
from sandboxes.drivers.base import DriverError

SCRIPT = Path(settings.BASE_DIR) / "images" / "egress-proxy" / "proxy.py"

_lock = threading.Lock()
_process: subprocess.Popen[bytes] | None = None


def _state_file() -> Path:
    return policy.egress_dir() / "local.json"


def _running() -> dict[str, int] | None:
    """The state of a live local proxy: ours, or one another process of this instance started."""
    try:
        state = json.loads(_state_file().read_text())
        stat = Path(f"/proc/{state['pid']}/stat").read_text()
        cmdline = Path(f"/proc/{state['pid']}/cmdline").read_bytes()
    except (OSError, ValueError, KeyError):
        return None
    if _process is not None and _process.pid == state["pid"] and _process.poll() is not None:
        return None  # ours, and ended (a zombie until now)
    alive = stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}
    return state if alive and str(SCRIPT).encode() in cmdline else None


def local_proxy_running() -> bool:
    return _running() is not None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def ensure_local_proxy() -> dict[str, int]:
    """{"forward": port, "credential": port} of the running local proxy, starting it if needed."""
    global _process
    with _lock:
        if state := _running():
            return state
        forward, credential = _free_port(), _free_port()
        policy.publish()
        policy.forget_ack()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "COCOON_EGRESS_DIR": str(policy.egress_dir()),
            "COCOON_EGRESS_BIND": LOOPBACK,
            "COCOON_EGRESS_FORWARD_PORT": str(forward),
            "COCOON_EGRESS_CREDENTIAL_PORT": str(credential),
            "COCOON_EGRESS_PARENT": str(os.getpid()),
        }
        # -B: its modules import each other, and their bytecode has no place in the image's folder.
        _process = subprocess.Popen(
            [sys.executable, "-u", "-B", str(SCRIPT)], env=env, stdout=subprocess.DEVNULL
        )
        state = {"pid": _process.pid, "forward": forward, "credential": credential}
        deadline = time.monotonic() + 10
        while policy.acknowledged() is None:
            if _process.poll() is not None or time.monotonic() > deadline:
                _process.kill()
                raise DriverError("the local egress proxy did not start")
            time.sleep(0.02)
        write_private_file(_state_file(), json.dumps(state))
        return state
