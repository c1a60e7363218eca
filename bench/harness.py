"""What every benchmark needs: a cocoond of its own, the sandbox image, a way to read RSS."""

import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker

from tests.conftest import ROOT, Cocoond, remove_instance_objects

IMAGE = "cocoon-sandbox:latest"


def sandbox_image() -> docker.DockerClient:
    """The engine, with the sandbox image built (on a base image seeded offline)."""
    client = docker.from_env()
    subprocess.run([str(ROOT / "scripts/seed-base-image")], check=True)
    client.images.build(path=str(ROOT / "images/sandbox"), tag=IMAGE, target="base", rm=True)
    return client


@contextmanager
def cocoond(**env: str) -> Iterator[Cocoond]:
    """A cocoond with its own data directory, port and engine instance name, access log off; it is
    stopped and everything it made in the engine removed afterwards."""
    data = Path(tempfile.mkdtemp(prefix="cocoon-bench-")) / "data"
    instance = f"cocoonbench{secrets.token_hex(3)}"
    server = Cocoond(
        data=data,
        env={"COCOON_INSTANCE": instance, "COCOON_LOG_LEVEL": "WARNING", "COCOON_AUTO_INSTALL": "0", **env},
        args=["--no-access-log"],
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()
        remove_instance_objects(docker.from_env(), server.instance)


def rss_mb(pid: int, peak: bool = False) -> float:
    """The process's resident memory now, or its peak (since start or the last reset_peak)."""
    field = "VmHWM:" if peak else "VmRSS:"
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")
