"""The Podman driver: Podman's Docker-compatible API, so it is the Docker driver with Podman's quirks.

Everything Podman does differently stays in this one class.
"""

import os
from pathlib import Path
from typing import Any

from sandboxes.drivers.base import SandboxSpec
from sandboxes.drivers.docker import DockerDriver


def podman_socket() -> Path | None:
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    for candidate in (Path(runtime_dir) / "podman/podman.sock", Path("/run/podman/podman.sock")):
        if candidate.is_socket():
            return candidate
    return None


class PodmanDriver(DockerDriver):
    kind = "podman"
    host_alias = "host.containers.internal"

    def __init__(self, base_url: str | None = None) -> None:
        socket_path = podman_socket()
        super().__init__(base_url or (f"unix://{socket_path}" if socket_path else None))

    def create_options(self, spec: SandboxSpec) -> dict[str, Any]:
        options = super().create_options(spec)
        # Podman adds host.containers.internal itself.
        options.pop("extra_hosts", None)
        if os.getuid() != 0:
            # Rootless: map the agent user to the invoking user, so volume files stay theirs.
            options["userns_mode"] = "keep-id:uid=1000,gid=1000"
        return options
