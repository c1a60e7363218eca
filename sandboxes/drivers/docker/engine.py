"""DockerEngine: what every part of the Docker driver shares: the SDK client, engine object names, the
toolbox volume, and how the SDK's errors become DriverErrors."""

from functools import cached_property
from typing import Any

import docker
from django.conf import settings
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


class _PinnedApiClient(docker.APIClient):
    """The SDK's client with the environment ignored from its first request on (it asks the engine's
    version while it is made): requests would take REQUESTS_CA_BUNDLE over the pinned CA, and
    HTTPS_PROXY over the way to the engine."""

    def _retrieve_server_version(self) -> str:
        self.trust_env = False
        return str(super()._retrieve_server_version())  # type: ignore[misc]


class _PinnedClient(docker.DockerClient):
    def __init__(self, **options: Any) -> None:
        self.api = _PinnedApiClient(**options)


def engine_client(url: str | None, tls: docker.tls.TLSConfig | None, timeout: int) -> docker.DockerClient:
    """A client of the engine at url (None: DOCKER_HOST or the default socket)."""
    if not url:
        return docker.from_env(timeout=timeout)
    return _PinnedClient(base_url=url, tls=tls or False, timeout=timeout)


class DockerEngine(SandboxDriver):
    """The base of the driver's parts (networks, images, exec), which DockerDriver puts together."""

    def __init__(self, base_url: str | None = None, tls: docker.tls.TLSConfig | None = None) -> None:
        self.base_url = base_url
        self.tls = tls

    @cached_property
    def _client(self) -> docker.DockerClient:
        return engine_client(self.base_url, self.tls, 120)

    def _container_name(self, sandbox_id: str) -> str:
        return object_name(sandbox_id)

    def remove_instance_objects(self) -> None:
        ours: dict[str, Any] = {"label": f"io.cocoon.instance={settings.COCOON_INSTANCE}"}
        try:
            for container in self._client.containers.list(all=True, filters=ours):
                container.remove(force=True, v=True)
            for network in self._client.networks.list(filters=ours):
                network.remove()
            for volume in self._client.volumes.list(filters=ours):
                volume.remove(force=True)
        except Exception as error:
            raise driver_error(error) from error

    def engine_id(self) -> str:
        try:
            return str(self._client.info().get("ID", ""))
        except Exception as error:
            raise driver_error(error) from error

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
