"""The egress proxy of a remote node, which shares no folder with cocoond: its policy goes in, and its
ack, usage records and denied attempts come out, through the node's engine (an exec in the proxy's
container: images/egress-proxy/exchange.py). Here they live in the node's mirror folder
(policy.node_dir), where cocoond reads them as it reads the local proxy's files.

What comes back is the node's word: bounded, parsed strictly, and a record can only speak for the
node's own sandboxes (usage.ingest, egress.services.collect_denied)."""

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from cocoon.datadir import write_private_file
from egress import policy
from egress.container import SERVICE, ensure_proxy, proxy_running
from egress.types import NodeProxyStatus
from sandboxes.choices import NetworkMode, SandboxState
from sandboxes.drivers.base import DriverError
from sandboxes.models import LOCAL_NODE, Node, Sandbox
from sandboxes.nodes import each_node, node_driver

logger = logging.getLogger(__name__)
EXCHANGE = ["python3", "/opt/cocoon-egress/exchange.py"]
ACK_WAIT_S = 10
TAKE_TIMEOUT_S = 30
MAX_ACK = 64 * 1024
FILES = ("usage.jsonl", "denied.jsonl")


def push(node: str, wait_s: float = ACK_WAIT_S) -> bool:
    """Send the node's proxy its policy; whether it loaded that version within wait_s (False: it
    refused it, said nothing, or is not there)."""
    path = policy.node_dir(node) / "policy.json"
    try:
        content = path.read_bytes()
        result = node_driver(node).exec_service(
            SERVICE, [*EXCHANGE, "push", str(wait_s)], stdin=content, timeout=wait_s + 5
        )
    except (OSError, DriverError) as error:
        logger.warning("could not send node %s its egress policy: %s", node, error)
        return False
    if result.exit_code != 0:
        logger.warning("node %s refused its egress policy: %s", node, result.stderr[-500:])
        return False
    try:
        ack = json.loads(result.stdout[:MAX_ACK])
    except ValueError:
        return False
    _store_ack(node, ack)
    acked = ack.get("version") if isinstance(ack, dict) else None
    return isinstance(acked, int) and acked >= json.loads(content).get("version", 0)


def _store_ack(node: str, ack: Any) -> None:
    """The proxy's ack into the node's mirror, unless it is older than the one there (a take that ran
    beside a push may bring the ack from before it). One without a version (a proxy restarted empty)
    replaces it: the tick sends that proxy its policy again."""
    if not isinstance(ack, dict):
        return
    version = ack.get("version")
    if isinstance(version, int) and version < (policy.acknowledged(node=node) or 0):
        return
    write_private_file(policy.node_dir(node) / "ack.json", json.dumps(ack))


def take(node: str) -> None:
    """Bring the node proxy's new usage records and denied attempts (and its ack) into its mirror
    folder, then let the proxy drop what was stored."""
    driver = node_driver(node)
    result = driver.exec_service(SERVICE, [*EXCHANGE, "take"], timeout=TAKE_TIMEOUT_S)
    header, _, payload = result.stdout.partition(b"\n")
    try:
        found = json.loads(header[:MAX_ACK])
        sizes, inodes = [found[name.split(".")[0]] for name in FILES], found["inodes"]
        numbers = [*sizes, *inodes]
        if not all(type(number) is int and number >= 0 for number in numbers) or len(inodes) != len(FILES):
            raise ValueError("not sizes and inodes")
        if sum(sizes) != len(payload):
            raise ValueError("sizes do not match")
    except (ValueError, KeyError, TypeError) as error:
        logger.warning("node %s's proxy gave no usable take (%s): %s", node, error, result.stderr[-500:])
        return
    _store_ack(node, found.get("ack"))
    if not sum(sizes):
        return
    offset = 0
    for name, size in zip(FILES, sizes, strict=True):
        _append(policy.node_dir(node) / name, payload[offset : offset + size])
        offset += size
    marks = [f"{inode}:{size}" for inode, size in zip(inodes, sizes, strict=True)]
    dropped = driver.exec_service(SERVICE, [*EXCHANGE, "drop", *marks], timeout=TAKE_TIMEOUT_S)
    if dropped.exit_code != 0:  # taken again next time: usage records are stored once, by their id
        logger.warning("node %s's proxy kept what was taken: %s", node, dropped.stderr[-500:])


def _append(path: Path, data: bytes) -> None:
    """Appended as the proxy does (opened per write), so a collect that moves the file aside meanwhile
    reads it whole."""
    if not data:
        return
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, data)
    finally:
        os.close(descriptor)


def sync(versions: dict[str, int], wait_for: set[str]) -> set[str]:
    """Send each reachable remote node whose proxy has not loaded its version its policy, at once, and
    wait until those of wait_for have loaded it; returns those of them that did not. The others are not
    waited for (one slow node must not hold up another's sandboxes): the tick sends it again to a proxy
    that has not said it loaded it."""
    due = [
        node
        for node in _reachable(set(versions) - {LOCAL_NODE})
        if (policy.acknowledged(node=node) or 0) < versions[node]
    ]
    loaded = each_node(lambda node: _push_if_running(node, node in wait_for), due)
    return {node for node, ok in zip(due, loaded, strict=True) if node in wait_for and not ok}


def _reachable(nodes: set[str]) -> list[str]:
    return sorted(Node.objects.filter(pk__in=nodes, reachable=True).values_list("pk", flat=True))


def _push_if_running(node: str, wait: bool) -> bool:
    try:
        running = proxy_running(node)
    except DriverError:
        return False
    # One not running gets its policy when it starts.
    return push(node, ACK_WAIT_S if wait else 0) if running else True


def tick() -> None:
    """For each reachable remote node in use: bring its proxy back if its sandboxes need it, take what
    it wrote, and send its policy again if it has not loaded it (a proxy restarted starts empty). One
    tick at a time per process: a slow node must not pile ticks up on the worker."""
    if not _tending.acquire(blocking=False):
        return
    try:
        nodes = _reachable(policy.remote_nodes_in_use())
        running = Sandbox.objects.filter(node__in=nodes, state=SandboxState.RUNNING)
        needed = set(running.exclude(network=NetworkMode.NONE).values_list("node", flat=True))
        each_node(lambda node: _tend(node, node in needed), nodes)
    finally:
        _tending.release()


_tending = threading.Lock()


def _tend(node: str, needed: bool) -> None:
    try:
        if not proxy_running(node):
            if not needed:
                return
            logger.warning("the egress proxy of node %s is down: starting it again", node)
            ensure_proxy(node)
        take(node)
        current: dict[str, Any] = policy.current(node) or {}
        if (policy.acknowledged(node=node) or 0) < current.get("version", 0):
            push(node)
    except Exception:  # one node's engine failing must not stop the others
        logger.exception("could not tend the egress proxy of node %s", node)


def statuses() -> list[NodeProxyStatus]:
    """The proxies of the remote nodes in use, by node name; one that is not reachable is not running."""
    in_use = list(Node.objects.filter(pk__in=policy.remote_nodes_in_use()).order_by("name"))
    return each_node(_status, in_use)


def _status(node: Node) -> NodeProxyStatus:
    # An engine that fails to say, or a node removed meanwhile: not running, for all we know.
    try:
        running = node.reachable and proxy_running(node.id)
    except Exception:
        running = False
    version = (policy.current(node.id) or {}).get("version")
    return NodeProxyStatus(
        node_id=node.id,
        name=node.name,
        running=running,
        policy_version=version,
        acknowledged_version=policy.acknowledged(node=node.id) if running else None,
        policy_error=policy.refused(version, node=node.id) if running else None,
    )
