"""DockerEngine: what every part of the Docker driver shares: the SDK client, engine object names, the
toolbox volume, and how the SDK's errors become DriverErrors."""

from functools import cached_property
from typing import Any

import docker
from docker.errors import APIError, NotFound
from docker.errors import ImageNotFound as DockerImageNotFound

from sandboxes.drivers.base import (
    DriverError,
    ImageNotFound,
    SandboxDriver,
    SandboxNotFound,
    labels,
    object_name,
)


def driver_error(error: Exception) -> DriverError:
    if isinstance(error, DockerImageNotFound):
        return ImageNotFound(str(error.explanation or error))
    if isinstance(error, APIError):
        return DriverError(str(error.explanation or error))
    return DriverError(str(error))


def sandbox_error(error: Exception) -> DriverError:
    """As driver_error, for calls on one sandbox's container: "not found" there means the sandbox is
    gone."""
    if isinstance(error, NotFound) and not isinstance(error, DockerImageNotFound):
        return SandboxNotFound(str(error.explanation or error))
    return driver_error(error)


def network_addresses(container: Any) -> dict[str, str]:
    """The container's address on each network it is on."""
    networks = container.attrs["NetworkSettings"].get("Networks") or {}
    return {name: network["IPAddress"] for name, network in networks.items() if network.get("IPAddress")}


class DockerEngine(SandboxDriver):
    """The base of the driver's parts (networks, images, exec), which DockerDriver puts together."""

    def __init__(self, base_url: str | None = None) -> None:
        self.base_url = base_url

    @cached_property
    def _client(self) -> docker.DockerClient:
        if self.base_url:
            return docker.DockerClient(base_url=self.base_url, timeout=120)
        return docker.from_env(timeout=120)

    def _container_name(self, sandbox_id: str) -> str:
        return object_name(sandbox_id)

    def _agents_volume(self) -> str:
        return object_name("agents")

    _shared_objects_ready = False

    def _ensure_shared_objects(self) -> None:
        """The toolbox volume, checked once per process rather than on every create."""
        if self._shared_objects_ready:
            return
        try:
            self._client.volumes.get(self._agents_volume())
        except NotFound:
            self._client.volumes.create(self._agents_volume(), labels=labels("volume"))
        self._shared_objects_ready = True
