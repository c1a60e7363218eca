"""The Docker driver: hardened containers through the Docker Engine API (the `docker` SDK)."""

import contextlib
import io
import ipaddress
import json
import math
import os
import socket
import struct
import tarfile
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import docker
from django.conf import settings
from docker.errors import APIError, NotFound
from docker.errors import ImageNotFound as DockerImageNotFound

from sandboxes.choices import Capability, NetworkMode, SandboxState
from sandboxes.drivers.base import (
    AGENT_HOME,
    AGENT_UID,
    AGENT_USER,
    MAX_EXEC_OUTPUT,
    STATUS_DIR,
    TOOLBOX,
    TOOLBOX_MANIFEST,
    WORKSPACE,
    DriverError,
    EngineState,
    ExecResult,
    ImageInfo,
    ImageNotFound,
    SandboxDriver,
    SandboxNotFound,
    SandboxSpec,
    ServiceSpec,
    ServiceState,
    TtySession,
    labels,
    object_name,
)

# Runtimes cocoon offers when the engine lists them (gVisor, Kata + Firecracker, libkrun).
OPTIONAL_RUNTIMES = ("runsc", "kata-fc", "krun")
STOP_TIMEOUT_S = 10
ENGINE_FACTS_TTL_S = 60
TMPFS_OPTIONS = "rw,nosuid,nodev,size=512m"
# Each sandbox network is this small: the sandbox, the egress proxy, the engine's gateway.
SUBNET_PREFIX = 28
# How long past the in-sandbox `timeout` the driver waits before giving up on the output stream.
EXEC_GRACE_S = 5
# Docker's multiplexed stream: each frame is a header (stream, 3 zero bytes, big-endian size), then data.
FRAME_HEADER = struct.Struct(">BxxxL")
READ_CHUNK = 65536


def _errors(error: Exception) -> DriverError:
    if isinstance(error, DockerImageNotFound):
        return ImageNotFound(str(error.explanation or error))
    if isinstance(error, APIError):
        return DriverError(str(error.explanation or error))
    return DriverError(str(error))


def _sandbox_errors(error: Exception) -> DriverError:
    """As _errors, for calls on one sandbox's container: "not found" there means the sandbox is gone."""
    if isinstance(error, NotFound) and not isinstance(error, DockerImageNotFound):
        return SandboxNotFound(str(error.explanation or error))
    return _errors(error)


def _addresses(container: Any) -> dict[str, str]:
    """The container's address on each network it is on."""
    networks = container.attrs["NetworkSettings"].get("Networks") or {}
    return {name: network["IPAddress"] for name, network in networks.items() if network.get("IPAddress")}


def _started_at(container: Any) -> float:
    stamp = container.attrs["State"]["StartedAt"]  # RFC 3339 with nanoseconds
    seconds, _, fraction = stamp.rstrip("Z").partition(".")
    started = datetime.fromisoformat(seconds).replace(tzinfo=UTC).timestamp()
    return started + float(f"0.{fraction or 0}")


def _host_routes() -> list[ipaddress.IPv4Network]:
    """The host's IPv4 routes other than the default: another engine's bridges (Podman next to Docker)
    and the host's own networks, which a sandbox network must not shadow."""
    try:
        lines = Path("/proc/net/route").read_text().splitlines()[1:]
    except OSError:
        return []
    routes = []
    for line in lines:
        fields = line.split()
        destination, mask = (socket.ntohl(int(value, 16)) for value in (fields[1], fields[7]))
        if mask:
            routes.append(ipaddress.IPv4Network((destination, bin(mask).count("1"))))
    return routes


def _stream_reader(sock: Any) -> io.BufferedReader:
    """The buffered reader that parsed the headers of an upgraded (attach, exec start) response.

    The engine may send the stream's first bytes right behind its `101 UPGRADED` headers; http.client
    reads the headers through this reader, which then holds those bytes in its buffer, where a read on
    the socket (`exec_start(socket=True)`, docker-py's own `frames_iter`) never sees them: a short
    command's whole output was lost that way (docker/docker-py#3332). The SDK keeps the response on the
    socket it returns and finds the socket under this same reader (`response.raw._fp.fp.raw`).
    """
    return sock._response.raw._fp.fp


def _frames(reader: io.BufferedReader) -> Iterator[tuple[int, bytes]]:
    """(stream, data) pieces of a multiplexed (non-TTY) stream, up to the end of the stream."""
    while len(header := reader.read(FRAME_HEADER.size)) == FRAME_HEADER.size:
        stream, remaining = FRAME_HEADER.unpack(header)
        while remaining:
            # read1: what is buffered, else one read on the socket; never waits for more than it has.
            data = reader.read1(min(remaining, READ_CHUNK))
            if not data:
                return
            remaining -= len(data)
            yield stream, data


class DockerTty(TtySession):
    def __init__(self, api: Any, exec_id: str, sock: Any) -> None:
        self.api = api
        self.exec_id = exec_id
        self.sock = sock
        self.raw: socket.socket = sock._sock
        # What the shell printed first may have come in with the response headers (see _stream_reader).
        self.reader = _stream_reader(sock)

    def read(self, size: int = 65536) -> bytes:
        try:
            return self.reader.read1(size)
        except OSError:
            return b""

    def write(self, data: bytes) -> None:
        self.raw.sendall(data)

    def resize(self, cols: int, rows: int) -> None:
        self.api.exec_resize(self.exec_id, height=rows, width=cols)

    def close(self) -> None:
        self.sock.close()


class DockerDriver(SandboxDriver):
    kind = "docker"
    host_alias = "host.docker.internal"
    # tmpfs options that make a tmpfs the agent's own (Docker hands mount options to the kernel).
    agent_tmpfs_owner = f"uid={AGENT_UID},gid={AGENT_UID}"

    def __init__(self, base_url: str | None = None) -> None:
        self.base_url = base_url

    @cached_property
    def _client(self) -> docker.DockerClient:
        if self.base_url:
            return docker.DockerClient(base_url=self.base_url, timeout=120)
        return docker.from_env(timeout=120)

    # -- engine facts ---------------------------------------------------------------------------

    def capabilities(self) -> list[str]:
        capabilities = [
            Capability.IMAGES,
            Capability.RESOURCE_LIMITS,
            Capability.EGRESS_ENFORCED,
            Capability.TTY,
            Capability.ARCHIVE,
        ]
        if self.runtimes():
            capabilities.append(Capability.RUNTIMES)
        return [str(capability) for capability in capabilities]

    def runtimes(self) -> list[str]:
        # system.info asks on every call and the engine's info is slow: remember it for a while.
        now = time.monotonic()
        if self._runtimes is None or now - self._runtimes[0] > ENGINE_FACTS_TTL_S:
            self._runtimes = (now, self._available_runtimes())
        return self._runtimes[1]

    _runtimes: tuple[float, list[str]] | None = None

    def keeps_sandboxes_across_engine_restarts(self) -> bool | None:
        try:
            return bool(self._client.info().get("LiveRestoreEnabled"))
        except Exception as error:
            raise _errors(error) from error

    def _available_runtimes(self) -> list[str]:
        try:
            available = self._client.info().get("Runtimes", {})
        except Exception:  # an engine that is down offers nothing
            return []
        return [runtime for runtime in OPTIONAL_RUNTIMES if runtime in available]

    def image_exists(self, image: str) -> bool:
        try:
            self._client.images.get(image)
        except DockerImageNotFound:
            return False
        except APIError as error:
            raise _errors(error) from error
        return True

    def image_info(self, image: str) -> ImageInfo | None:
        try:
            found = self._client.images.get(image)
        except DockerImageNotFound:
            return None
        except Exception as error:
            raise _errors(error) from error
        return ImageInfo(id=found.id, size_bytes=found.attrs["Size"], created_at=found.attrs["Created"])

    def build_image(self, context: Path, tag: str, *, kind: str, target: str | None = None) -> Iterator[str]:
        try:
            for chunk in self._client.api.build(
                path=str(context),
                tag=tag,
                target=target,
                rm=True,
                forcerm=True,
                decode=True,
                labels={"io.cocoon.image": kind},
            ):
                if "error" in chunk:
                    raise DriverError(chunk["error"].strip())
                if line := chunk.get("stream", "").strip():
                    yield line
        except DriverError:
            raise
        except Exception as error:
            raise _errors(error) from error

    # -- networks -------------------------------------------------------------------------------

    def _network_name(self, mode: str) -> str | None:
        """The shared networks: only "outbound", the egress proxy's way out (sandboxes get their own)."""
        return object_name("outbound") if mode == "outbound" else None

    def _existing_networks(self, modes: tuple[str, ...]) -> tuple[list[str], set[str]]:
        """The names of the shared networks of these modes (by default those sandboxes use), and those
        of them the engine has."""
        wanted = [name for mode in modes or ("outbound",) if (name := self._network_name(mode))]
        return wanted, {network.name for network in self._client.networks.list(names=wanted)}

    def networks_exist(self, *modes: str) -> bool:
        try:
            wanted, existing = self._existing_networks(modes)
        except Exception as error:
            raise _errors(error) from error
        return set(wanted) <= existing

    def ensure_networks(self, *modes: str) -> None:
        try:
            wanted, existing = self._existing_networks(modes)
            for name in wanted:
                if name not in existing:
                    self._client.networks.create(name, driver="bridge", labels=labels("network"))
        except APIError as error:
            raise _errors(error) from error

    def sandbox_network(self, sandbox_id: str) -> str:
        return object_name(sandbox_id, "net")

    def create_sandbox_network(self, sandbox_id: str, mode: str) -> str:
        """The sandbox's own network: only it and the egress proxy are ever attached, so no sandbox
        reaches another (the engine isolates bridges from each other). Egress: internal, and no host
        address on its bridge either (host services listening on all interfaces stay out of reach)."""
        name = self.sandbox_network(sandbox_id)
        extra: dict[str, Any] = {}
        if mode == NetworkMode.EGRESS:
            extra = {"internal": True, "options": {"com.docker.network.bridge.inhibit_ipv4": "true"}}
        for subnet in self._free_subnets():
            pool = docker.types.IPAMPool(subnet=str(subnet), gateway=str(subnet[1]))
            ipam = docker.types.IPAMConfig(pool_configs=[pool])
            try:
                self._client.networks.create(
                    name, driver="bridge", ipam=ipam, labels=labels("network", sandbox_id), **extra
                )
                return name
            except APIError as error:
                # Another creator (of this or another instance on the engine) took it meanwhile.
                if "overlap" not in str(error.explanation or error).lower():
                    raise _errors(error) from error
        raise DriverError(f"no free /{SUBNET_PREFIX} subnet left in {settings.COCOON_SANDBOX_SUBNETS}")

    def _free_subnets(self) -> Iterator[ipaddress.IPv4Network]:
        """Subnets of COCOON_SANDBOX_SUBNETS no network on the engine overlaps. Explicit and small: the
        engine's default pools hand out /16s or /24s and run dry after a few dozen networks."""
        used = [
            ipaddress.ip_network(config["Subnet"], strict=False)
            for network in self._client.networks.list()
            for config in (network.attrs.get("IPAM") or {}).get("Config") or []
            if config.get("Subnet")
        ] + _host_routes()
        pool = ipaddress.ip_network(settings.COCOON_SANDBOX_SUBNETS)
        for subnet in pool.subnets(new_prefix=SUBNET_PREFIX):
            if not any(subnet.overlaps(other) for other in used):
                yield subnet

    def _sandbox_networks(self) -> list[Any]:
        """The networks of this instance's sandboxes (the egress proxy is attached to each)."""
        instance = labels("network")["io.cocoon.instance"]
        filters = {"label": [f"io.cocoon.instance={instance}", "io.cocoon.sandbox"]}
        return self._client.networks.list(filters=filters)

    def _remove_sandbox_network(self, sandbox_id: str) -> None:
        try:
            network = self._client.networks.get(self.sandbox_network(sandbox_id))
        except NotFound:
            return
        for container in network.containers:  # the proxy, attached by egress
            with contextlib.suppress(NotFound, APIError):
                network.disconnect(container, force=True)
        with contextlib.suppress(NotFound):
            network.remove()

    # -- lifecycle ------------------------------------------------------------------------------

    def _container_name(self, sandbox_id: str) -> str:
        return object_name(sandbox_id)

    def _workspace_volume(self, sandbox_id: str) -> str:
        return object_name(sandbox_id, "workspace")

    def _home_volume(self, sandbox_id: str) -> str:
        return object_name(sandbox_id, "home")

    def _agents_volume(self) -> str:
        return object_name("agents")

    def _create_options(self, spec: SandboxSpec) -> dict[str, Any]:
        """The hardened container definition; engine-specific tweaks go in subclasses."""
        options: dict[str, Any] = {
            "image": spec.image,
            "command": ["sleep", "infinity"],
            "name": self._container_name(spec.sandbox_id),
            "hostname": spec.hostname,
            "labels": labels("sandbox", spec.sandbox_id),
            "user": AGENT_USER,
            "working_dir": WORKSPACE,
            "init": True,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges:true"],
            "nano_cpus": int(spec.limits.cpus * 1e9),
            "mem_limit": f"{spec.limits.memory_mb}m",
            "memswap_limit": f"{spec.limits.memory_mb}m",  # no swap beyond the memory limit
            "pids_limit": spec.limits.pids,
            "tmpfs": {"/tmp": TMPFS_OPTIONS},
            "restart_policy": {"Name": "unless-stopped"},
            "mounts": [
                docker.types.Mount(WORKSPACE, self._workspace_volume(spec.sandbox_id), type="volume"),
                docker.types.Mount(TOOLBOX, self._agents_volume(), type="volume", read_only=True),
            ],
        }
        if spec.network == NetworkMode.NONE:
            options["network_mode"] = "none"
        else:
            options["network"] = self.sandbox_network(spec.sandbox_id)
        if spec.network == NetworkMode.OPEN:
            options["extra_hosts"] = {self.host_alias: "host-gateway"}
        if spec.env:
            options["environment"] = spec.env
        if spec.dns:
            options["dns"] = spec.dns
        if spec.runtime:
            options["runtime"] = spec.runtime
        if spec.read_only_root:
            # The agent's home is a volume the engine seeds from the image (dotfiles, ownership), so
            # it survives a restart like the workspace; the status files need not.
            options["read_only"] = True
            options["tmpfs"][STATUS_DIR] = f"{TMPFS_OPTIONS},{self.agent_tmpfs_owner},mode=0755"
            options["mounts"].append(
                docker.types.Mount(AGENT_HOME, self._home_volume(spec.sandbox_id), type="volume")
            )
        return options

    def _service_options(self) -> dict[str, Any]:
        """Engine-specific options for cocoon's own service containers (the egress proxy)."""
        return {"user": f"{os.getuid()}:{os.getgid()}", "extra_hosts": {self.host_alias: "host-gateway"}}

    # -- service containers (the egress proxy) ---------------------------------------------------

    def _service(self, name: str) -> Any:
        try:
            return self._client.containers.get(object_name(name))
        except Exception as error:
            raise _errors(error) from error

    def _service_state(self, container: Any) -> ServiceState:
        addresses = _addresses(container)
        running = container.status == "running"
        return ServiceState(
            running=running,
            address=addresses.get(self._network_name("outbound") or ""),
            addresses=addresses,
            started_at=_started_at(container) if running else None,
        )

    def find_service(self, name: str) -> ServiceState | None:
        try:
            container = self._client.containers.get(object_name(name))
        except NotFound:
            return None
        except Exception as error:
            raise _errors(error) from error
        return self._service_state(container)

    def service_image_tags(self, name: str) -> list[str]:
        container = self._service(name)
        try:
            return list(container.image.tags)
        except Exception as error:
            raise _errors(error) from error

    def create_service(self, spec: ServiceSpec) -> ServiceState:
        self.ensure_networks("outbound")
        try:
            container = self._client.containers.create(
                spec.image,
                name=object_name(spec.name),
                labels=labels(spec.name),
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges:true"],
                mem_limit=f"{spec.memory_mb}m",
                pids_limit=spec.pids,
                network=self._network_name("outbound"),
                mounts=[
                    docker.types.Mount(target, source, type="bind") for target, source in spec.binds.items()
                ],
                environment=spec.env,
                restart_policy={"Name": "unless-stopped"},
                **self._service_options(),
            )
        except Exception as error:
            raise _errors(error) from error
        try:
            # A replaced service serves the sandboxes that exist already.
            for network in self._sandbox_networks():
                network.connect(container, aliases=[spec.alias])
        except Exception as error:
            container.remove(force=True)
            raise _errors(error) from error
        return self._service_state(container)

    def start_service(self, name: str) -> ServiceState:
        container = self._service(name)
        try:
            container.start()
            container.reload()
        except Exception as error:
            raise _errors(error) from error
        return self._service_state(container)

    def restart_service(self, name: str) -> None:
        container = self._service(name)
        try:
            container.restart()
        except Exception as error:
            raise _errors(error) from error

    def connect_service(self, name: str, network: str, alias: str) -> ServiceState:
        container = self._service(name)
        try:
            self._client.networks.get(network).connect(container, aliases=[alias])
            container.reload()
        except Exception as error:
            raise _errors(error) from error
        return self._service_state(container)

    def remove_service(self, name: str) -> None:
        try:
            self._client.containers.get(object_name(name)).remove(force=True)
        except NotFound:
            pass
        except Exception as error:
            raise _errors(error) from error

    def create(self, spec: SandboxSpec) -> EngineState:
        try:
            self._ensure_shared_objects()
            if spec.network != NetworkMode.NONE and not self._has_network(spec.sandbox_id):
                self.create_sandbox_network(spec.sandbox_id, spec.network)
            volumes = [self._workspace_volume(spec.sandbox_id)]
            if spec.read_only_root:
                volumes.append(self._home_volume(spec.sandbox_id))
            for volume in volumes:  # labelled, so reconcile and clean-ups find them
                self._client.volumes.create(volume, labels=labels("volume", spec.sandbox_id))
            options = self._create_options(spec)
            try:
                container = self._client.containers.create(**options)
            except NotFound as error:
                if not self.image_exists(spec.image):
                    raise ImageNotFound(spec.image) from error
                # The toolbox volume was removed behind our back.
                self._shared_objects_ready = False
                self._ensure_shared_objects()
                container = self._client.containers.create(**options)
            if spec.workspace is not None and not container.put_archive(WORKSPACE, spec.workspace):
                raise DriverError("could not seed the workspace")
            container.start()
            return self._state(container)
        except Exception as error:
            self.remove(spec.sandbox_id)
            raise error if isinstance(error, DriverError) else _errors(error) from error

    _shared_objects_ready = False

    def _has_network(self, sandbox_id: str) -> bool:
        return bool(self._client.networks.list(names=[self.sandbox_network(sandbox_id)]))

    def _ensure_shared_objects(self) -> None:
        """The toolbox volume, checked once per process rather than on every create."""
        if self._shared_objects_ready:
            return
        try:
            self._client.volumes.get(self._agents_volume())
        except NotFound:
            self._client.volumes.create(self._agents_volume(), labels=labels("volume"))
        self._shared_objects_ready = True

    def _container(self, sandbox_id: str) -> Any:
        try:
            return self._client.containers.get(self._container_name(sandbox_id))
        except Exception as error:
            raise _sandbox_errors(error) from error

    def _state(self, container: Any) -> EngineState:
        container.reload()
        status = container.attrs["State"]["Status"]
        state = SandboxState.RUNNING if status in {"running", "restarting"} else SandboxState.STOPPED
        return EngineState(state=state, ips=_addresses(container))

    def start(self, sandbox_id: str) -> EngineState:
        container = self._container(sandbox_id)
        try:
            container.start()
        except APIError as error:
            raise _errors(error) from error
        return self._state(container)

    def stop(self, sandbox_id: str) -> EngineState:
        container = self._container(sandbox_id)
        try:
            container.stop(timeout=STOP_TIMEOUT_S)
        except APIError as error:
            raise _errors(error) from error
        return self._state(container)

    def remove(self, sandbox_id: str) -> None:
        with contextlib.suppress(NotFound):
            self._client.containers.get(self._container_name(sandbox_id)).remove(force=True, v=True)
        for volume in (self._workspace_volume(sandbox_id), self._home_volume(sandbox_id)):
            with contextlib.suppress(NotFound):
                self._client.volumes.get(volume).remove(force=True)
        self._remove_sandbox_network(sandbox_id)

    def inspect(self, sandbox_id: str) -> EngineState:
        try:
            return self._state(self._container(sandbox_id))
        except (SandboxNotFound, NotFound):
            # NotFound: removed between the lookup and the reload (a delete running at the same time).
            return EngineState(state=SandboxState.MISSING)

    def list_ids(self) -> set[str]:
        instance = labels("sandbox")["io.cocoon.instance"]
        filters = {"label": [f"io.cocoon.instance={instance}", "io.cocoon.kind=sandbox"]}
        # ignore_removed: the SDK inspects each listed container; one deleted meanwhile is no orphan.
        containers = self._client.containers.list(all=True, filters=filters, ignore_removed=True)
        volumes = self._client.volumes.list(filters={"label": f"io.cocoon.instance={instance}"})
        ids = {container.labels["io.cocoon.sandbox"] for container in containers}
        ids |= {
            volume.attrs["Labels"]["io.cocoon.sandbox"]
            for volume in volumes
            if "io.cocoon.sandbox" in (volume.attrs["Labels"] or {})
        }
        return ids | {network.attrs["Labels"]["io.cocoon.sandbox"] for network in self._sandbox_networks()}

    # -- exec -----------------------------------------------------------------------------------

    def exec(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        user: str = AGENT_USER,
        workdir: str = WORKSPACE,
        timeout: float = 60,
    ) -> ExecResult:
        api = self._client.api
        # `timeout` inside the sandbox kills the command; the socket deadline below is the backstop.
        limit = max(1, math.ceil(timeout))
        wrapped = ["timeout", "-k", "2", str(limit), *command]
        started = time.monotonic()
        try:
            exec_id = api.exec_create(
                self._container_name(sandbox_id),
                wrapped,
                stdin=stdin is not None,
                environment=env or {},
                workdir=workdir,
                user=user,
            )["Id"]
            sock = api.exec_start(exec_id, socket=True)
        except Exception as error:
            raise _sandbox_errors(error) from error
        raw: socket.socket = sock._sock
        raw.settimeout(limit + EXEC_GRACE_S)
        output = {1: bytearray(), 2: bytearray()}
        truncated = False
        try:
            if stdin is not None:
                raw.sendall(stdin)
                raw.shutdown(socket.SHUT_WR)
            for stream, data in _frames(_stream_reader(sock)):
                buffer = output.get(stream)
                if buffer is None:
                    continue
                room = MAX_EXEC_OUTPUT - len(buffer)
                if len(data) > room:
                    truncated = True
                buffer += data[: max(room, 0)]
        except TimeoutError:
            return ExecResult(-1, bytes(output[1]), bytes(output[2]), timed_out=True, truncated=truncated)
        finally:
            sock.close()
        exit_code = api.exec_inspect(exec_id)["ExitCode"]
        timed_out = exit_code in {124, 137} and time.monotonic() - started >= limit
        return ExecResult(
            exit_code, bytes(output[1]), bytes(output[2]), timed_out=timed_out, truncated=truncated
        )

    def open_tty(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        cols: int = 80,
        rows: int = 24,
        env: dict[str, str] | None = None,
        user: str = AGENT_USER,
        workdir: str = WORKSPACE,
    ) -> TtySession:
        api = self._client.api
        try:
            exec_id = api.exec_create(
                self._container_name(sandbox_id),
                command,
                stdin=True,
                tty=True,
                environment={"TERM": "xterm-256color", **(env or {})},
                workdir=workdir,
                user=user,
            )["Id"]
            sock = api.exec_start(exec_id, socket=True, tty=True)
            api.exec_resize(exec_id, height=rows, width=cols)
        except Exception as error:
            raise _sandbox_errors(error) from error
        return DockerTty(api, exec_id, sock)

    # -- toolbox --------------------------------------------------------------------------------

    def _toolbox_helper(self, command: list[str]) -> Any:
        """A short-lived container with the toolbox volume mounted writable; the caller removes it."""
        from cocoon.config import get_settings

        self._ensure_shared_objects()
        return self._client.containers.create(
            image=get_settings()["sandbox"]["image"],
            command=command,
            user="root",
            network_mode="none",
            labels=labels("toolbox"),
            mounts=[docker.types.Mount(TOOLBOX, self._agents_volume(), type="volume")],
        )

    def install_toolbox(self, source: Path) -> None:
        try:
            helper = self._toolbox_helper(["sh", "-c", f"find {TOOLBOX} -mindepth 1 -delete"])
        except Exception as error:
            raise _errors(error) from error
        try:
            helper.start()
            if helper.wait(timeout=300)["StatusCode"] != 0:
                raise DriverError("could not empty the toolbox volume")
            with tempfile.TemporaryFile(dir=source.parent) as archive:
                with tarfile.open(fileobj=archive, mode="w") as tar:
                    tar.add(source, arcname=".")
                archive.seek(0)
                if not helper.put_archive(TOOLBOX, archive):
                    raise DriverError("could not copy the toolbox into its volume")
        except APIError as error:
            raise _errors(error) from error
        finally:
            helper.remove(force=True)

    def toolbox_manifest(self) -> dict[str, Any] | None:
        try:
            helper = self._toolbox_helper(["true"])  # runs the sandbox image, which may not exist yet
        except DockerImageNotFound as error:
            raise ImageNotFound(str(error.explanation or error)) from error
        try:
            stream, _stat = helper.get_archive(f"{TOOLBOX}/{TOOLBOX_MANIFEST}")
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                member = tar.extractfile(TOOLBOX_MANIFEST)
                return json.loads(member.read()) if member else None
        except NotFound:
            return None
        finally:
            helper.remove(force=True)

    # -- files ----------------------------------------------------------------------------------

    def put_archive(self, sandbox_id: str, path: str, data: bytes) -> None:
        try:
            if not self._container(sandbox_id).put_archive(path, data):
                raise DriverError(f"could not extract into {path}")
        except APIError as error:
            raise _errors(error) from error

    def get_archive(self, sandbox_id: str, path: str) -> Iterator[bytes]:
        try:
            stream, _stat = self._container(sandbox_id).get_archive(path)
        except APIError as error:
            raise _errors(error) from error
        return stream
