"""The egress proxy's container: built from images/egress-proxy (tagged by content, so a changed
proxy is rebuilt), run read-only with no capabilities as cocoond's UID, on the outbound network and, as
cocoon-proxy, on every sandbox's own network."""

import contextlib
import hashlib
import logging
import threading
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import docker
from django.conf import settings
from docker.errors import APIError, NotFound

from egress import policy
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError, labels, object_name

logger = logging.getLogger(__name__)
CONTEXT = Path(settings.BASE_DIR) / "images" / "egress-proxy"
MOUNT = "/etc/cocoon-egress"
ALIAS = "cocoon-proxy"
_lock = threading.Lock()


@cache  # the proxy's files do not change while cocoond runs; the 2 s health tick asks for this
def image_tag() -> str:
    digest = hashlib.sha256()
    for path in sorted(CONTEXT.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"cocoon-egress-proxy:{digest.hexdigest()[:12]}"


def container_name() -> str:
    return object_name("egress-proxy")


def _client() -> docker.DockerClient:
    return get_driver().client


def ensure_image() -> str:
    client, tag = _client(), image_tag()
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        logger.info("building %s", tag)
        try:
            client.images.build(
                path=str(CONTEXT), tag=tag, rm=True, forcerm=True, labels={"io.cocoon.image": "egress-proxy"}
            )
        except (APIError, docker.errors.BuildError) as error:
            raise DriverError(f"could not build the egress proxy image: {error}") from error
    return tag


def _address_on(container: Any, network: str) -> str | None:
    networks = container.attrs["NetworkSettings"].get("Networks") or {}
    return (networks.get(network) or {}).get("IPAddress") or None


def _find() -> Any | None:
    try:
        return _client().containers.get(container_name())
    except NotFound:
        return None


def ensure_proxy() -> Any:
    """The proxy's container, started (or replaced by a current one) if needed."""
    with _lock:
        tag = ensure_image()
        container = _find()
        if container is not None and container.image.tags and tag not in container.image.tags:
            container.remove(force=True)
            container = None
        try:
            if container is None:
                container = _create(tag)
            if container.status != "running":
                # An ack from before would vouch for a process that is not listening yet.
                policy.forget_ack()
                container.start()
                container.reload()
        except APIError as error:
            raise DriverError(str(error.explanation or error)) from error
        return container


def attach(network: str) -> str:
    """Put the proxy on one sandbox's network as cocoon-proxy; returns its address there."""
    container = ensure_proxy()
    if _address_on(container, network) is None:
        try:
            _client().networks.get(network).connect(container, aliases=[ALIAS])
        except APIError as error:
            raise DriverError(str(error.explanation or error)) from error
        container.reload()
    address = _address_on(container, network)
    if address is None:
        raise DriverError(f"the egress proxy has no address on {network}")
    return address


def _create(tag: str) -> Any:
    driver = get_driver()
    driver.ensure_networks("outbound")
    policy.publish()  # the proxy starts with a policy to load
    client = driver.client
    container = client.containers.create(
        tag,
        name=container_name(),
        labels=labels("egress-proxy"),
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges:true"],
        mem_limit="512m",
        pids_limit=4096,  # a thread per held connection
        network=driver.network_name("outbound"),
        mounts=[docker.types.Mount(MOUNT, str(policy.egress_dir()), type="bind")],
        environment={"COCOON_EGRESS_DIR": MOUNT},
        restart_policy={"Name": "unless-stopped"},
        **driver.service_options(),
    )
    try:
        # A replaced proxy serves the sandboxes that exist already.
        for network in driver.sandbox_networks():
            network.connect(container, aliases=[ALIAS])
    except Exception:
        container.remove(force=True)
        raise
    return container


def restart_proxy() -> None:
    with _lock:
        container = _find()
        if container is not None:
            policy.forget_ack()  # the old process's ack must not vouch for the new one
            container.restart()


def proxy_running() -> bool:
    container = _find()
    return container is not None and container.status == "running"


def proxy_status() -> dict[str, Any]:
    container = _find()
    running = container is not None and container.status == "running"
    current = policy.current() or {}
    # Only an ack written since the container (re)started counts (the engine may restart it itself).
    since = _started_at(container) if running else None
    acked = policy.acknowledged(since=since) if running else None
    return {
        "running": running,
        "image": image_tag(),
        "address": _address_on(container, get_driver().network_name("outbound")) if container else None,
        "policyVersion": current.get("version"),
        "acknowledgedVersion": acked,
        "policyError": policy.refused(current.get("version"), since=since) if running else None,
    }


def _started_at(container: Any) -> float:
    stamp = container.attrs["State"]["StartedAt"]  # RFC 3339 with nanoseconds
    seconds, _, fraction = stamp.rstrip("Z").partition(".")
    started = datetime.fromisoformat(seconds).replace(tzinfo=UTC).timestamp()
    return started + float(f"0.{fraction or 0}")


def remove_proxy() -> None:
    with contextlib.suppress(NotFound):
        _client().containers.get(container_name()).remove(force=True)
