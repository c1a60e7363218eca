"""The Podman driver: Podman's Docker-compatible API, so it is the Docker driver with Podman's quirks.

Everything Podman does differently stays in this one class.
"""

import os
import resource
from pathlib import Path
from typing import Any

import docker

from sandboxes.choices import OPTIONAL_RUNTIMES
from sandboxes.drivers.base import SandboxSpec
from sandboxes.drivers.docker.driver import DockerDriver

RLIMIT_CAP = 16384


def _hard_limit(limit: int) -> int:
    hard = resource.getrlimit(limit)[1]
    return hard if hard != resource.RLIM_INFINITY else 1 << 20


def podman_socket() -> Path | None:
    """CONTAINER_HOST (Podman's own variable) if it names a local socket, else the usual places."""
    explicit = os.environ.get("CONTAINER_HOST", "")
    if explicit.startswith("unix://"):
        return Path(explicit.removeprefix("unix://"))
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    for candidate in (Path(runtime_dir) / "podman/podman.sock", Path("/run/podman/podman.sock")):
        if candidate.is_socket():
            return candidate
    return None


class PodmanDriver(DockerDriver):
    kind = "podman"
    host_alias = "host.containers.internal"
    # Podman refuses uid=/gid= on a tmpfs; U chowns it to the container's user (the agent).
    agent_tmpfs_owner = "U"

    def __init__(self, base_url: str | None = None) -> None:
        socket_path = podman_socket()
        super().__init__(base_url or (f"unix://{socket_path}" if socket_path else None))

    def keeps_sandboxes_across_engine_restarts(self) -> bool | None:
        return None  # no daemon: each container has its own monitor (conmon)

    def _available_runtimes(self) -> list[str]:
        # Podman lists every runtime its configuration knows, installed or not; its socket is local,
        # so keep those whose binary is really there.
        try:
            known = self._client.info().get("Runtimes", {})
        except Exception:
            return []
        return [
            runtime
            for runtime in OPTIONAL_RUNTIMES
            if runtime in known and Path(known[runtime].get("path", "")).is_file()
        ]

    def _create_options(self, spec: SandboxSpec) -> dict[str, Any]:
        options = super()._create_options(spec)
        # Podman adds host.containers.internal itself.
        options.pop("extra_hosts", None)
        options["ulimits"] = self._ulimits()
        if os.getuid() != 0:
            # Rootless: map the agent user to the invoking user, so volume files stay theirs.
            options["userns_mode"] = "keep-id:uid=1000,gid=1000"
        return options

    def _service_options(self) -> dict[str, Any]:
        # Container root is the user running Podman (rootless) or root (rootful): cocoond's UID either
        # way, so the proxy can write its ack next to the policy.
        return {"user": "0:0", "ulimits": self._ulimits()}

    def _helper_options(self) -> dict[str, Any]:
        return {"ulimits": self._ulimits()}

    @staticmethod
    def _ulimits() -> list[docker.types.Ulimit]:
        # Podman's default rlimits (a million open files) fail where the service's own hard limits are
        # lower; ask for a modest amount that is below them on any ordinary host.
        return [
            docker.types.Ulimit(name=name, soft=value, hard=value)
            for name, limit in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC))
            for value in [min(_hard_limit(limit), RLIMIT_CAP)]
        ]
