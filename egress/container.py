"""The egress proxy's container: built from images/egress-proxy (tagged by content, so a changed
proxy is rebuilt), run by the driver as a service container (read-only, no capabilities, cocoond's UID)
on the outbound network and, as cocoon-proxy, on every sandbox's own network."""

import hashlib
import logging
import threading
from functools import cache
from pathlib import Path

from django.conf import settings

from egress import policy
from egress.types import ProxyStatus
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError, SandboxDriver, ServiceSpec, ServiceState
from sandboxes.models import LOCAL_NODE
from sandboxes.nodes import node_driver, ship_image

logger = logging.getLogger(__name__)
CONTEXT = Path(settings.BASE_DIR) / "images" / "egress-proxy"
MOUNT = "/etc/cocoon-egress"
ALIAS = "cocoon-proxy"
SERVICE = "egress-proxy"
_locks: dict[str, threading.Lock] = {}  # per node: one node's slow engine holds up no other's proxy
_locks_lock = threading.Lock()


def _lock(node: str) -> threading.Lock:
    with _locks_lock:
        return _locks.setdefault(node, threading.Lock())


@cache  # the proxy's files do not change while cocoond runs; the 2 s health tick asks for this
def image_tag() -> str:
    digest = hashlib.sha256()
    for path in sorted(CONTEXT.iterdir()):
        if not path.is_file():  # __pycache__, left by a local proxy or a test that imported its modules
            continue
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"cocoon-egress-proxy:{digest.hexdigest()[:12]}"


def ensure_image(node: str = LOCAL_NODE) -> str:
    """The proxy's image on the node: built by the local engine, shipped to a remote one (a node may
    not reach a package mirror, and one build serves every node)."""
    driver, tag = get_driver(), image_tag()
    if not driver.image_exists(tag):
        logger.info("building %s", tag)
        try:
            for _line in driver.build_image(CONTEXT, tag, kind=SERVICE):
                pass
        except DriverError as error:
            raise DriverError(f"could not build the egress proxy image: {error}") from error
    if node != LOCAL_NODE and not ship_image(node, tag):
        raise DriverError(f"could not ship the egress proxy image to node {node}")
    return tag


def ensure_proxy(node: str = LOCAL_NODE) -> ServiceState:
    """The node's proxy container, started (or replaced by a current one) if needed."""
    with _lock(node):
        driver, tag = node_driver(node), ensure_image(node)
        proxy = driver.find_service(SERVICE)
        # Replaced: one of an older image, and one another data directory left (its folder may be gone,
        # and is not this one's anyway); the proxy holds nothing of its own.
        if proxy is not None and (not _ours(proxy) or _outdated(driver, tag)):
            driver.remove_service(SERVICE)
            proxy = None
        if proxy is None:
            proxy = _create(tag, node)
        if not proxy.running:
            # An ack from before would vouch for a process that is not listening yet.
            policy.forget_ack(node)
            proxy = driver.start_service(SERVICE)
        return proxy


def _ours(proxy: ServiceState) -> bool:
    """Made by this data directory: another's serves a policy from that one's folder, not this one's."""
    return proxy.data == settings.COCOON_DATA_ID


def _outdated(driver: SandboxDriver, tag: str) -> bool:
    tags = driver.service_image_tags(SERVICE)
    return bool(tags) and tag not in tags


def attach(network: str, node: str = LOCAL_NODE) -> str:
    """Put the node's proxy on one sandbox's network as cocoon-proxy; returns its address there."""
    proxy = ensure_proxy(node)
    if network not in proxy.addresses:
        proxy = node_driver(node).connect_service(SERVICE, network, ALIAS)
    address = proxy.addresses.get(network)
    if address is None:
        raise DriverError(f"the egress proxy has no address on {network}")
    return address


def _create(tag: str, node: str) -> ServiceState:
    local = node == LOCAL_NODE
    if local:
        policy.publish()  # the proxy starts with a policy to load
    spec = ServiceSpec(
        name=SERVICE,
        image=tag,
        memory_mb=512,
        pids=4096,  # a thread per held connection
        alias=ALIAS,
        env={"COCOON_EGRESS_DIR": MOUNT},
        binds={MOUNT: str(policy.egress_dir())} if local else {},
        # A remote node has nothing of this host: the proxy's files are its own, traded by egress.remote.
        scratch="" if local else MOUNT,
    )
    return node_driver(node).create_service(spec)


def restart_proxy() -> None:
    with _lock(LOCAL_NODE):
        driver = get_driver()
        if driver.find_service(SERVICE) is not None:
            policy.forget_ack()  # the old process's ack must not vouch for the new one
            driver.restart_service(SERVICE)


def proxy_running(node: str = LOCAL_NODE) -> bool:
    proxy = node_driver(node).find_service(SERVICE)
    return proxy is not None and proxy.running and _ours(proxy)


def proxy_status() -> ProxyStatus:
    proxy = get_driver().find_service(SERVICE)
    running = proxy is not None and proxy.running and _ours(proxy)
    current = policy.current() or {}
    # Only an ack written since the container (re)started counts (the engine may restart it itself).
    since = proxy.started_at if proxy is not None and running else None
    return ProxyStatus(
        running=running,
        image=image_tag(),
        address=proxy.address if proxy is not None else None,
        policy_version=current.get("version"),
        acknowledged_version=policy.acknowledged(since=since) if running else None,
        policy_error=policy.refused(current.get("version"), since=since) if running else None,
    )
