"""Sandbox drivers behind one interface; get_driver() picks the configured or detected one."""

import os
import shutil
from functools import cache
from pathlib import Path

from django.conf import settings

from sandboxes.drivers.base import DriverError, SandboxDriver

DRIVER_KINDS = ("docker", "podman", "bwrap")


def _docker_available() -> bool:
    return bool(os.environ.get("DOCKER_HOST")) or Path("/var/run/docker.sock").is_socket()


def detect_driver_kind() -> str | None:
    """COCOON_DRIVER, or for "auto": Podman socket -> Docker -> bubblewrap (SPEC §1)."""
    from sandboxes.drivers.podman import podman_socket

    if settings.COCOON_DRIVER in DRIVER_KINDS:
        return settings.COCOON_DRIVER
    if podman_socket():
        return "podman"
    if _docker_available():
        return "docker"
    if shutil.which("bwrap"):
        return "bwrap"
    return None


@cache
def get_driver() -> SandboxDriver:
    kind = detect_driver_kind()
    if kind == "docker":
        from sandboxes.drivers.docker import DockerDriver

        return DockerDriver()
    if kind == "podman":
        from sandboxes.drivers.podman import PodmanDriver

        return PodmanDriver()
    if kind == "bwrap":
        from sandboxes.drivers.bwrap import BwrapDriver

        return BwrapDriver()
    raise DriverError("no sandbox engine found: install Docker, Podman or bubblewrap")


def engine_errors() -> tuple[type[Exception], ...]:
    """The engine SDK's exceptions (and an unreachable engine's), which the method registry shows as a
    DriverError should one escape a driver."""
    from docker.errors import DockerException
    from requests.exceptions import ConnectionError as EngineUnreachable

    return DockerException, EngineUnreachable


def as_driver_error(error: Exception) -> DriverError:
    return DriverError(str(getattr(error, "explanation", None) or error))
