"""Nodes: the engines sandboxes run on, and which engine a sandbox's calls go to. One is the local
engine (DOCKER_HOST or the default socket), the node every install has; more are Docker engines on other
hosts, reached over their own remote API with mutual TLS (cocoon's client certificate, the engine's CA
pinned). cocoon runs nothing of its own on a node: what it does there, it does through the engine's API,
as on the local one.

A node is ready (new sandboxes may go there), draining (none may; those there stay until stopped) or
unreachable (its last check got no answer: its sandboxes are missing until it answers again). Taking
nodes in and out is sandboxes.node_services', checking them sandboxes.node_health's, choosing one for a
new sandbox sandboxes.node_choice's.
"""

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django import db
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from cocoon import settings_schema, vault
from cocoon.lookup import get_or_not_found
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import SandboxDriver
from sandboxes.drivers.docker import remote
from sandboxes.models import LOCAL_NODE, Node, Sandbox

logger = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

CHECKS_AT_ONCE = 8
LOCAL_NAME = settings_schema.LOCAL_NODE_NAME


def local_node() -> Node:
    node, _created = Node.objects.get_or_create(pk=LOCAL_NODE, defaults={"name": LOCAL_NAME})
    return node


def list_nodes() -> list[Node]:
    """The local node first, then the others by name."""
    return [local_node(), *Node.objects.exclude(pk=LOCAL_NODE)]


def get_node(node_id: str) -> Node:
    if node_id == LOCAL_NODE:
        return local_node()
    return get_or_not_found(Node.objects.all(), node_id, _("Node %(id)s does not exist."), id=node_id)


def several_nodes() -> bool:
    """Whether there is a node but the local one (else a runtime is the local engine's to check)."""
    return Node.objects.exclude(pk=LOCAL_NODE).exists()


def key_secret(node_id: str) -> str:
    return f"NODE_{node_id.upper()}_KEY"


def engine_tls(node: Node) -> Any:
    """What reaching the node's engine takes (its TLS material as the SDK reads it); None for a socket."""
    if not node.url.startswith("tcp://"):
        return None
    key = vault.read_secret(key_secret(node.id)) or ""
    return remote.tls_config(settings.DATA_DIR / "nodes" / node.id, node.ca, node.cert, key)


# -- drivers ------------------------------------------------------------------------------------------

# Kept per process: the way to a node (url, CA, certificate) never changes (node.update changes labels
# and capacity; another way is another node), and a sandbox never moves to another node.
_drivers: dict[str, SandboxDriver] = {}
_nodes_of: dict[str, str] = {}
_lock = threading.Lock()
NODES_OF_MAX = 100_000  # then forgotten and asked again


def node_driver(node_id: str) -> SandboxDriver:
    """The driver of a node's engine."""
    if node_id == LOCAL_NODE:
        return get_driver()
    with _lock:
        known = _drivers.get(node_id)
    if known is not None:
        return known
    node = get_or_not_found(Node.objects.all(), node_id, _("Node %(id)s does not exist."), id=node_id)
    from sandboxes.drivers.docker import DockerDriver

    driver = DockerDriver(base_url=node.url, tls=engine_tls(node))
    with _lock:
        return _drivers.setdefault(node_id, driver)


def forget_driver(node_id: str) -> None:
    """The node is gone (node.remove): its driver is not kept any more."""
    with _lock:
        _drivers.pop(node_id, None)


def reachable_nodes() -> list[str]:
    """The nodes whose engines answered their last check (the local one always counts)."""
    return [
        LOCAL_NODE,
        *Node.objects.exclude(pk=LOCAL_NODE).filter(reachable=True).values_list("pk", flat=True),
    ]


def node_reachable(node_id: str) -> bool:
    """Whether the node is known and answered its last check (a node removed is not)."""
    return node_id == LOCAL_NODE or Node.objects.filter(pk=node_id, reachable=True).exists()


def ship_image(node_id: str, image: str, *, recheck: bool = False) -> bool:
    """Give a remote node the local engine's copy of an image, unless it has that very image (by id)
    under the name already: a rebuilt image reaches the nodes with their next create. False when the
    local engine has none by that name (the node's own, if any, is used). One shipping per node and
    image at a time (per process): creates that find it missing at once wait, then find it there.
    recheck: ask the node even if it was given this image (it may have been removed there since)."""
    local = get_driver().image_info(image)
    if local is None:
        return False
    with _lock:
        if recheck:
            _shipped.pop((node_id, image), None)
        if _shipped.get((node_id, image)) == local.id:
            return True
        shipping = _shipping.setdefault((node_id, image), threading.Lock())
    with shipping:
        there = node_driver(node_id).image_info(image)
        if there is None or there.id != local.id:
            node = get_node(node_id)
            logger.info("shipping image %s to node %s", image, node.name)
            if not remote.ship_image(image, node.url, engine_tls(node)):
                return False
        with _lock:
            _shipped[(node_id, image)] = local.id
    return True


_shipping: dict[tuple[str, str], threading.Lock] = {}
_shipped: dict[tuple[str, str], str] = {}  # the image id each node was last given under a name


def driver_of(sandbox_id: str) -> SandboxDriver:
    """The driver of the node a sandbox runs on. Asked on every exec: the database only the first time."""
    return node_driver(node_of(sandbox_id))


def node_of(sandbox_id: str) -> str:
    """The node a sandbox runs on (the local one for a sandbox without a row); a sandbox never moves."""
    with _lock:
        node_id = _nodes_of.get(sandbox_id)
    if node_id is None:
        node_id = Sandbox.objects.filter(pk=sandbox_id).values_list("node", flat=True).first()
        if node_id is None:
            return LOCAL_NODE
        remember_node(sandbox_id, node_id)
    return node_id


def remember_node(sandbox_id: str, node_id: str) -> None:
    """What node_of() answers for a sandbox, told by its create: no query for it afterwards."""
    with _lock:
        if len(_nodes_of) >= NODES_OF_MAX:
            _nodes_of.clear()
        _nodes_of[sandbox_id] = node_id


# -- every node at once -------------------------------------------------------------------------------


def each_node(work: Callable[[T], R], nodes: list[T]) -> list[R]:
    """work done for every node at once (at most CHECKS_AT_ONCE at a time): one slow engine must not
    hold up the others. work must not raise."""
    if not nodes:
        return []
    with ThreadPoolExecutor(min(len(nodes), CHECKS_AT_ONCE)) as pool:
        return list(pool.map(_closing(work), nodes))


def _closing(work: Callable[[T], R]) -> Callable[[T], R]:
    def run(node: T) -> R:
        try:
            return work(node)
        finally:
            db.connections.close_all()  # this thread's, which the pool's next task would not reuse

    return run
