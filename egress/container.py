"""The egress proxy's container: built from images/egress-proxy (tagged by content, so a changed
proxy is rebuilt), run by the driver as a service container (read-only, no capabilities, cocoond's UID)
on the outbound network and, as cocoon-proxy, on every sandbox's own network."""

import hashlib
import logging
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.conf import settings

from egress import policy
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError, ServiceSpec, ServiceState

logger = logging.getLogger(__name__)
CONTEXT = Path(settings.BASE_DIR) / "images" / "egress-proxy"
MOUNT = "/etc/cocoon-egress"
ALIAS = "cocoon-proxy"
SERVICE = "egress-proxy"
_lock = threading.Lock()


@cache  # the proxy's files do not change while cocoond runs; the 2 s health tick asks for this
def image_tag() -> str:
    digest = hashlib.sha256()
    for path in sorted(CONTEXT.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"cocoon-egress-proxy:{digest.hexdigest()[:12]}"


def ensure_image() -> str:
    driver, tag = get_driver(), image_tag()
    if not driver.image_exists(tag):
        logger.info("building %s", tag)
        try:
            for _line in driver.build_image(CONTEXT, tag, kind=SERVICE):
                pass
        except DriverError as error:
            raise DriverError(f"could not build the egress proxy image: {error}") from error
    return tag


def ensure_proxy() -> ServiceState:
    """The proxy's container, started (or replaced by a current one) if needed."""
    with _lock:
        driver, tag = get_driver(), ensure_image()
        proxy = driver.find_service(SERVICE)
        if proxy is not None and (tags := driver.service_image_tags(SERVICE)) and tag not in tags:
            driver.remove_service(SERVICE)
            proxy = None
        if proxy is None:
            proxy = _create(tag)
        if not proxy.running:
            # An ack from before would vouch for a process that is not listening yet.
            policy.forget_ack()
            proxy = driver.start_service(SERVICE)
        return proxy


def attach(network: str) -> str:
    """Put the proxy on one sandbox's network as cocoon-proxy; returns its address there."""
    proxy = ensure_proxy()
    if network not in proxy.addresses:
        proxy = get_driver().connect_service(SERVICE, network, ALIAS)
    address = proxy.addresses.get(network)
    if address is None:
        raise DriverError(f"the egress proxy has no address on {network}")
    return address


def _create(tag: str) -> ServiceState:
    policy.publish()  # the proxy starts with a policy to load
    spec = ServiceSpec(
        name=SERVICE,
        image=tag,
        memory_mb=512,
        pids=4096,  # a thread per held connection
        alias=ALIAS,
        binds={MOUNT: str(policy.egress_dir())},
        env={"COCOON_EGRESS_DIR": MOUNT},
    )
    return get_driver().create_service(spec)


def restart_proxy() -> None:
    with _lock:
        driver = get_driver()
        if driver.find_service(SERVICE) is not None:
            policy.forget_ack()  # the old process's ack must not vouch for the new one
            driver.restart_service(SERVICE)


def proxy_running() -> bool:
    proxy = get_driver().find_service(SERVICE)
    return proxy is not None and proxy.running


@dataclass(frozen=True)
class ProxyStatus:
    running: bool
    image: str
    address: str | None
    policy_version: int | None
    acknowledged_version: int | None
    # Why the proxy refused the current policy (it keeps serving the last one it could use).
    policy_error: str | None


def proxy_status() -> ProxyStatus:
    proxy = get_driver().find_service(SERVICE)
    running = proxy is not None and proxy.running
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


def remove_proxy() -> None:
    get_driver().remove_service(SERVICE)
