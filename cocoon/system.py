"""What this server is and runs on (system.info)."""

import os
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings

import cocoon

DRIVER_KINDS = ("docker", "podman", "bwrap")


def _podman_socket() -> Path | None:
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    for candidate in (Path(runtime_dir) / "podman/podman.sock", Path("/run/podman/podman.sock")):
        if candidate.is_socket():
            return candidate
    return None


def _docker_available() -> bool:
    return bool(os.environ.get("DOCKER_HOST")) or Path("/var/run/docker.sock").is_socket()


def detect_driver_kind() -> str | None:
    """COCOON_DRIVER, or for "auto": Podman socket -> Docker -> bubblewrap (SPEC §1)."""
    if settings.COCOON_DRIVER in DRIVER_KINDS:
        return settings.COCOON_DRIVER
    if _podman_socket():
        return "podman"
    if _docker_available():
        return "docker"
    if shutil.which("bwrap"):
        return "bwrap"
    return None


def system_info() -> dict[str, Any]:
    return {
        "version": cocoon.__version__,
        "driverKind": detect_driver_kind(),
        # Filled from the driver's own report once sandbox drivers exist.
        "capabilities": [],
        "runtimes": [],
        "embeddedWorker": settings.CELERY_EMBEDDED,
        "languages": [code for code, _name in settings.LANGUAGES],
    }
