"""Networks (the shared "outbound" one and each sandbox's own) and cocoon's service containers (the
egress proxy), which live on them; and the one-shot helper that sets the host's rules for them."""

import contextlib
import ipaddress
import os
import secrets
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
from django.conf import settings
from docker.errors import APIError, NotFound

from sandboxes.choices import NetworkMode
from sandboxes.drivers.base import (
    DATA_LABEL,
    DriverError,
    ExecResult,
    ServiceSpec,
    ServiceState,
    labels,
    object_name,
)
from sandboxes.drivers.docker.engine import DockerEngine, driver_error, network_addresses

# Each sandbox network is this small: the sandbox, the egress proxy, the engine's gateway.
SUBNET_PREFIX = 28

Subnet = ipaddress.IPv4Network | ipaddress.IPv6Network
# Cocoon's service containers on a remote engine: no one's files to own there.
REMOTE_SERVICE_USER = "65534:65534"
SCRATCH_MB = 64


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


def _started_at(container: Any) -> float:
    stamp = container.attrs["State"]["StartedAt"]  # RFC 3339 with nanoseconds
    seconds, _, fraction = stamp.rstrip("Z").partition(".")
    started = datetime.fromisoformat(seconds).replace(tzinfo=UTC).timestamp()
    return started + float(f"0.{fraction or 0}")


class DockerNetworks(DockerEngine):
    def _network_name(self, mode: str) -> str | None:
        """The shared networks: only "outbound", the egress proxy's way out (sandboxes get their own)."""
        return object_name("outbound") if mode == "outbound" else None

    def _existing_networks(self, modes: tuple[str, ...]) -> tuple[list[str], set[str]]:
        """The names of the shared networks of these modes (by default those sandboxes use), and those
        of them the engine has."""
        wanted = [name for mode in modes or ("outbound",) if (name := self._network_name(mode))]
        return wanted, {network.attrs["Name"] for network in self._client.networks.list(names=wanted)}

    def networks_exist(self, *modes: str) -> bool:
        try:
            wanted, existing = self._existing_networks(modes)
        except Exception as error:
            raise driver_error(error) from error
        return set(wanted) <= existing

    def ensure_networks(self, *modes: str) -> None:
        try:
            wanted, existing = self._existing_networks(modes)
            for name in wanted:
                if name not in existing:
                    self._client.networks.create(name, driver="bridge", labels=labels("network"))
        except APIError as error:
            raise driver_error(error) from error

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
                    raise driver_error(error) from error
        raise DriverError(f"no free /{SUBNET_PREFIX} subnet left in {settings.COCOON_SANDBOX_SUBNETS}")

    def _free_subnets(self) -> Iterator[Subnet]:
        """Subnets of COCOON_SANDBOX_SUBNETS no network on the engine overlaps. Explicit and small: the
        engine's default pools hand out /16s or /24s and run dry after a few dozen networks."""
        used: list[Subnet] = [
            ipaddress.ip_network(config["Subnet"], strict=False)
            for network in self._client.networks.list()
            for config in (network.attrs.get("IPAM") or {}).get("Config") or []
            if config.get("Subnet")
        ]
        used += _host_routes()
        pool = ipaddress.ip_network(settings.COCOON_SANDBOX_SUBNETS)
        for subnet in pool.subnets(new_prefix=SUBNET_PREFIX):
            if not any(subnet.overlaps(other) for other in used):
                yield subnet

    def _has_network(self, sandbox_id: str) -> bool:
        return bool(self._client.networks.list(names=[self.sandbox_network(sandbox_id)]))

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

    # -- service containers (the egress proxy) ---------------------------------------------------

    def _service_options(self) -> dict[str, Any]:
        """Engine-specific options for cocoon's own service containers (the egress proxy): cocoond's
        user, who owns the files it shares with them; on a remote engine, which shares none, nobody."""
        user = REMOTE_SERVICE_USER if self.base_url else f"{os.getuid()}:{os.getgid()}"
        return {"user": user, "extra_hosts": {self.host_alias: "host-gateway"}}

    def _service(self, name: str) -> Any:
        try:
            return self._client.containers.get(object_name(name))
        except Exception as error:
            raise driver_error(error) from error

    def _service_state(self, container: Any) -> ServiceState:
        addresses = network_addresses(container)
        running = container.status == "running"
        return ServiceState(
            running=running,
            address=addresses.get(self._network_name("outbound") or ""),
            addresses=addresses,
            started_at=_started_at(container) if running else None,
            data=container.labels.get(DATA_LABEL, ""),
        )

    def _scratch(self, spec: ServiceSpec) -> dict[str, str]:
        if not spec.scratch:
            return {}
        uid, _, gid = self._service_options()["user"].partition(":")
        return {spec.scratch: f"uid={uid},gid={gid or uid},mode=0700,size={SCRATCH_MB}m"}

    def find_service(self, name: str) -> ServiceState | None:
        try:
            container = self._client.containers.get(object_name(name))
        except NotFound:
            return None
        except Exception as error:
            raise driver_error(error) from error
        return self._service_state(container)

    def service_image_tags(self, name: str) -> list[str]:
        container = self._service(name)
        try:
            return list(container.image.tags)
        except Exception as error:
            raise driver_error(error) from error

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
                tmpfs=self._scratch(spec),
                environment=spec.env,
                # The SDK's stubs know only "always" and "on-failure"; the engine takes this one too.
                restart_policy={"Name": "unless-stopped"},  # type: ignore[arg-type]
                **self._service_options(),
            )
        except Exception as error:
            raise driver_error(error) from error
        try:
            # A replaced service serves the sandboxes that exist already.
            for network in self._sandbox_networks():
                network.connect(container, aliases=[spec.alias])
        except Exception as error:
            container.remove(force=True)
            raise driver_error(error) from error
        return self._service_state(container)

    def start_service(self, name: str) -> ServiceState:
        container = self._service(name)
        try:
            container.start()
            container.reload()
        except Exception as error:
            raise driver_error(error) from error
        return self._service_state(container)

    def restart_service(self, name: str) -> None:
        container = self._service(name)
        try:
            container.restart()
        except Exception as error:
            raise driver_error(error) from error

    def connect_service(self, name: str, network: str, alias: str) -> ServiceState:
        container = self._service(name)
        try:
            self._client.networks.get(network).connect(container, aliases=[alias])
            container.reload()
        except Exception as error:
            raise driver_error(error) from error
        return self._service_state(container)

    def _helper_options(self) -> dict[str, Any]:
        """Engine-specific options for the one-shot helper containers."""
        return {}

    def run_host_helper(
        self, image: str, command: list[str], *, host_network: bool = True, timeout: float = 60
    ) -> ExecResult:
        container = None
        try:
            container = self._client.containers.create(
                image,
                command[1:],
                entrypoint=command[:1],  # not []: Podman would keep the image's own then
                name=object_name("helper", secrets.token_hex(4)),
                labels=labels("helper"),
                user="0:0" if host_network else "65534:65534",
                network_mode="host" if host_network else "bridge",
                cap_drop=["ALL"],
                cap_add=["NET_ADMIN", "NET_RAW"] if host_network else [],
                security_opt=["no-new-privileges:true"],
                read_only=True,
                tmpfs={"/run": "size=1m"},  # iptables' lock file
                mem_limit="128m",
                pids_limit=32,
                **self._helper_options(),
            )
            container.start()
            exit_code = container.wait(timeout=timeout)["StatusCode"]
            stdout = container.logs(stdout=True, stderr=False)
            stderr = container.logs(stdout=False, stderr=True)
        except Exception as error:
            raise driver_error(error) from error
        finally:
            if container is not None:
                with contextlib.suppress(Exception):
                    container.remove(force=True)
        return ExecResult(exit_code, stdout, stderr)

    def remove_service(self, name: str) -> None:
        try:
            self._client.containers.get(object_name(name)).remove(force=True)
        except NotFound:
            pass
        except Exception as error:
            raise driver_error(error) from error
