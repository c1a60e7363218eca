"""DockerDriver: engine facts, a sandbox's lifecycle and its files, on top of the driver's other parts."""

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import docker
from docker.errors import APIError, NotFound

from sandboxes.choices import OPTIONAL_RUNTIMES, Capability, NetworkMode, SandboxState
from sandboxes.drivers.base import (
    AGENT_HOME,
    AGENT_UID,
    AGENT_USER,
    BASELINE_LABEL,
    DATA_LABEL,
    STATUS_DIR,
    TOOLBOX,
    WORKSPACE,
    Baseline,
    DriverError,
    EngineState,
    FoundSandbox,
    ImageNotFound,
    Limits,
    SandboxNotFound,
    SandboxSpec,
    labels,
    object_name,
)
from sandboxes.drivers.docker.engine import driver_error, network_addresses, sandbox_error
from sandboxes.drivers.docker.images import DockerImages
from sandboxes.drivers.docker.networks import DockerNetworks
from sandboxes.drivers.docker.streams import DockerExec

STOP_TIMEOUT_S = 10
ENGINE_FACTS_TTL_S = 60
TMPFS_OPTIONS = "rw,nosuid,nodev,size=512m"


class DockerDriver(DockerNetworks, DockerImages, DockerExec):
    kind = "docker"
    host_alias = "host.docker.internal"
    # tmpfs options that make a tmpfs the agent's own (Docker hands mount options to the kernel).
    agent_tmpfs_owner = f"uid={AGENT_UID},gid={AGENT_UID}"

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
            raise driver_error(error) from error

    def _available_runtimes(self) -> list[str]:
        try:
            available = self._client.info().get("Runtimes", {})
        except Exception:  # an engine that is down offers nothing
            return []
        return [runtime for runtime in OPTIONAL_RUNTIMES if runtime in available]

    # -- lifecycle ------------------------------------------------------------------------------

    def _workspace_volume(self, sandbox_id: str) -> str:
        return object_name(sandbox_id, "workspace")

    def _home_volume(self, sandbox_id: str) -> str:
        return object_name(sandbox_id, "home")

    def _member_volume(self, sandbox_id: str) -> str:
        """An empty volume marking a warm pool member until a claim: the engine's one mutable mark
        (a container's labels are fixed), made and removed in one call each."""
        return object_name(sandbox_id, "member")

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
            if spec.pool_member:
                self._client.volumes.create(
                    self._member_volume(spec.sandbox_id), labels=labels("member", spec.sandbox_id)
                )
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
            if spec.workspace is not None and not self._seeded(container, spec.workspace):
                raise DriverError("could not seed the workspace")
            container.start()
            return self._state(container)
        except Exception as error:
            self.remove(spec.sandbox_id)
            raise error if isinstance(error, DriverError) else driver_error(error) from error

    @staticmethod
    def _seeded(container: Any, baseline: Baseline) -> bool:
        """Put the baseline into the new container's workspace, unless its image has it baked: an
        image's labels are its containers' (create returned them), and the engine copies the image's
        /workspace into the new, empty volume when the container starts."""
        if container.labels.get(BASELINE_LABEL) == baseline.branch:
            return True
        return bool(container.put_archive(WORKSPACE, baseline.archive))

    def _container(self, sandbox_id: str) -> Any:
        try:
            return self._client.containers.get(self._container_name(sandbox_id))
        except Exception as error:
            raise sandbox_error(error) from error

    def _state(self, container: Any) -> EngineState:
        container.reload()
        status = container.attrs["State"]["Status"]
        state = SandboxState.RUNNING if status in {"running", "restarting"} else SandboxState.STOPPED
        return EngineState(state=state, ips=network_addresses(container))

    def start(self, sandbox_id: str) -> EngineState:
        container = self._container(sandbox_id)
        try:
            container.start()
        except APIError as error:
            raise driver_error(error) from error
        return self._state(container)

    def stop(self, sandbox_id: str) -> EngineState:
        container = self._container(sandbox_id)
        try:
            container.stop(timeout=STOP_TIMEOUT_S)
        except APIError as error:
            raise driver_error(error) from error
        return self._state(container)

    def remove(self, sandbox_id: str) -> None:
        with contextlib.suppress(NotFound):
            self._client.containers.get(self._container_name(sandbox_id)).remove(force=True, v=True)
        for volume in (self._workspace_volume(sandbox_id), self._home_volume(sandbox_id)):
            with contextlib.suppress(NotFound):
                self._client.volumes.get(volume).remove(force=True)
        self.release_member(sandbox_id)
        self._remove_sandbox_network(sandbox_id)

    def members(self) -> set[str]:
        instance = labels("member")["io.cocoon.instance"]
        marks = self._client.volumes.list(
            filters={"label": [f"io.cocoon.instance={instance}", "io.cocoon.kind=member"]}
        )
        return {(volume.attrs["Labels"] or {}).get("io.cocoon.sandbox", "") for volume in marks} - {""}

    def release_member(self, sandbox_id: str) -> None:
        try:
            self._client.volumes.get(self._member_volume(sandbox_id)).remove(force=True)
        except NotFound:
            pass
        except APIError as error:
            raise driver_error(error) from error

    def describe(self, sandbox_id: str) -> FoundSandbox:
        attrs = self._container(sandbox_id).attrs
        host = attrs["HostConfig"]
        if host.get("NetworkMode") == "none":
            network = NetworkMode.NONE
        else:
            try:
                internal = self._client.networks.get(self.sandbox_network(sandbox_id)).attrs["Internal"]
            except NotFound:
                raise DriverError(f"sandbox {sandbox_id} has lost its network") from None
            network = NetworkMode.EGRESS if internal else NetworkMode.OPEN
        runtime = host.get("Runtime") or ""
        return FoundSandbox(
            image=attrs["Config"]["Image"],
            network=network,
            limits=Limits(
                cpus=(host.get("NanoCpus") or 0) / 1e9,
                memory_mb=(host.get("Memory") or 0) // (1024 * 1024),
                pids=host.get("PidsLimit") or 0,
            ),
            runtime=runtime if runtime in OPTIONAL_RUNTIMES else "",
        )

    def inspect(self, sandbox_id: str) -> EngineState:
        try:
            return self._state(self._container(sandbox_id))
        except (SandboxNotFound, NotFound):
            # NotFound: removed between the lookup and the reload (a delete running at the same time).
            return EngineState(state=SandboxState.MISSING)

    def list_ids(self) -> set[str]:
        return set(self.owners())

    def owners(self) -> dict[str, str]:
        instance = labels("sandbox")["io.cocoon.instance"]
        # ignore_removed: the SDK inspects each listed container; one deleted meanwhile is no orphan.
        containers = self._client.containers.list(
            all=True,
            filters={"label": [f"io.cocoon.instance={instance}", "io.cocoon.kind=sandbox"]},
            ignore_removed=True,
        )
        volumes = self._client.volumes.list(filters={"label": f"io.cocoon.instance={instance}"})
        # A sandbox's objects were made together: any one of them says which data directory made it.
        marked = [network.attrs["Labels"] for network in self._sandbox_networks()]
        marked += [volume.attrs["Labels"] or {} for volume in volumes]
        marked += [container.labels for container in containers]
        return {
            each["io.cocoon.sandbox"]: each.get(DATA_LABEL, "")
            for each in marked
            if "io.cocoon.sandbox" in each
        }

    # -- files ----------------------------------------------------------------------------------

    def put_archive(self, sandbox_id: str, path: str, data: bytes) -> None:
        try:
            if not self._container(sandbox_id).put_archive(path, data):
                raise DriverError(f"could not extract into {path}")
        except APIError as error:
            raise driver_error(error) from error

    def get_archive(self, sandbox_id: str, path: str) -> Iterator[bytes]:
        try:
            stream: Iterator[bytes]
            stream, _stat = self._container(sandbox_id).get_archive(path)
        except APIError as error:
            raise driver_error(error) from error
        return stream
