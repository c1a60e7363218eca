"""What every benchmark needs: a cocoond of its own, the sandbox image, a way to read RSS."""

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import docker

from tests.conftest import ROOT, Cocoond, free_port, remove_instance_objects, wait_until

IMAGE = "cocoon-sandbox:latest"
T = TypeVar("T")
R = TypeVar("R")


def sandbox_image() -> docker.DockerClient:
    """The engine, with the sandbox image built (on a base image seeded offline)."""
    client = docker.from_env()
    subprocess.run([str(ROOT / "scripts/seed-base-image")], check=True)
    client.images.build(path=str(ROOT / "images/sandbox"), tag=IMAGE, target="base", rm=True)
    return client


@contextmanager
def daphne(application: str, **env: str) -> Iterator[int]:
    """A baseline app of bench/ (module:attribute) on a Daphne of its own; its port, once it listens."""
    port = free_port()
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), application]
    environment = os.environ | {"PYTHONPATH": str(ROOT), **env}
    proc = subprocess.Popen(
        command, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: _listening(port), timeout=60)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@contextmanager
def cocoond(**env: str) -> Iterator[Cocoond]:
    """A cocoond with its own data directory, port and engine instance name, access log off; it is
    stopped and everything it made in the engine removed afterwards, also after a failure, Ctrl-C or
    SIGTERM (a second Ctrl-C during the removal is ignored: it would leave sandboxes behind)."""
    data = Path(tempfile.mkdtemp(prefix="cocoon-bench-")) / "data"
    instance = f"cocoonbench{secrets.token_hex(3)}"
    server = Cocoond(
        data=data,
        env={"COCOON_INSTANCE": instance, "COCOON_LOG_LEVEL": "WARNING", "COCOON_AUTO_INSTALL": "0", **env},
        args=["--no-access-log"],
    )
    terminated = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        server.start()
        yield server
    finally:
        interrupted = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            print(f"removing what {server.instance} made in the engine", file=sys.stderr)
            server.stop()
        finally:
            remove_instance_objects(docker.from_env(), server.instance)
            signal.signal(signal.SIGINT, interrupted)
            signal.signal(signal.SIGTERM, terminated)


def in_parallel(function: Callable[[T], R], items: Iterable[T], workers: int = 8) -> list[R]:
    """function over items, workers at a time; on the first failure (or Ctrl-C) the calls not yet
    started are dropped rather than all made before the error surfaces."""
    pool = ThreadPoolExecutor(workers)
    try:
        return list(pool.map(function, items))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def rss_mb(pid: int, peak: bool = False) -> float:
    """The process's resident memory now, or its peak (since start or the last reset_peak)."""
    field = "VmHWM:" if peak else "VmRSS:"
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")
