"""Nodes: the engines sandboxes run on. One is the local engine (DOCKER_HOST or the default socket),
the node every install has; more are Docker engines on other hosts, reached over their own remote API
with mutual TLS (cocoon's client certificate, the engine's CA pinned). cocoon runs nothing of its own
on a node: what it does there, it does through the engine's API, as on the local one.

A node is ready (new sandboxes may go there), draining (none may; those there stay until stopped) or
unreachable (its last check got no answer: its sandboxes are missing until it answers again).
"""

import logging
import os
import re
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, TypeVar

from django import db
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import activity, config, events, settings_schema, vault
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import Conflict, field_error, interpolate_lazy
from cocoon.lookup import get_or_not_found
from sandboxes import placement
from sandboxes.choices import NetworkMode, SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import SandboxDriver
from sandboxes.drivers.docker import remote
from sandboxes.models import LOCAL_NODE, Node, Sandbox

logger = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

CHECK_TIMEOUT_S = 5  # a check that gets no answer in this time has failed
UNREACHABLE_AFTER_S = 8  # a node whose checks have failed for this long is unreachable
CHECKS_AT_ONCE = 8
# Capacity not given by the admin: the engine's CPUs and memory, overcommitted (a sandbox's limits are
# caps its agents mostly stay far below while they wait for their model), and a count.
CPU_OVERCOMMIT = 8
MEMORY_OVERCOMMIT = 2
MAX_SANDBOXES = 100
# Never unix://: the local engine is the local node, and any other socket is none of an admin's business.
URL = re.compile(r"tcp://[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}")

events.register_types("node.updated", "node.removed", visibility=Visibility.ADMIN)
activity.register_messages(
    {
        "node.added": _("Node %(name)s was added."),
        "node.updated": _("Node %(name)s was changed."),
        "node.draining": _("Node %(name)s is draining: no new sandboxes go there."),
        "node.removed": _("Node %(name)s was removed."),
        "node.unreachable": _("Node %(name)s does not answer: %(error)s"),
        "node.back": _("Node %(name)s answers again."),
    },
    visibility=Visibility.ADMIN,
)


@dataclass(frozen=True)
class Tls:
    """What reaching a TLS engine takes: its CA (pinned), cocoon's certificate and key (PEM)."""

    ca: str
    cert: str
    key: str


LOCAL_NAME = settings_schema.LOCAL_NODE_NAME


def local_node() -> Node:
    node, _created = Node.objects.get_or_create(pk=LOCAL_NODE, defaults={"name": LOCAL_NAME})
    return node


def key_secret(node_id: str) -> str:
    return f"NODE_{node_id.upper()}_KEY"


def _engine_tls(node: Node) -> Any:
    if not node.url.startswith("tcp://"):
        return None
    key = vault.read_secret(key_secret(node.id)) or ""
    return remote.tls_config(settings.DATA_DIR / "nodes" / node.id, node.ca, node.cert, key)


def probe(url: str, tls: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine's facts, and the capacity it offers before the admin's overrides."""
    facts = remote.probe(url, tls, CHECK_TIMEOUT_S)
    cpus, memory_mb = facts.pop("cpus"), facts.pop("memoryMb")
    capacity = {
        "cpus": cpus * CPU_OVERCOMMIT,
        "memoryMb": memory_mb * MEMORY_OVERCOMMIT,
        "maxSandboxes": MAX_SANDBOXES,
    }
    return facts, capacity


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

    driver = DockerDriver(base_url=node.url, tls=_engine_tls(node))
    with _lock:
        return _drivers.setdefault(node_id, driver)


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
            if not remote.ship_image(image, node.url, _engine_tls(node)):
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


# -- the methods' services ------------------------------------------------------------------------


def used_by_node(*node_ids: str) -> dict[str, placement.Room]:
    """What the sandboxes on each node (of these, or all) hold by their limits, missing ones left out,
    stopped ones only their place (they hold no CPU or memory until started): one query for all nodes."""
    held = Sandbox.objects.exclude(state=SandboxState.MISSING)
    if node_ids:
        held = held.filter(node__in=node_ids)
    live = ~Q(state=SandboxState.STOPPED)
    rows = held.values("node").annotate(
        count=Count("id"), cpus=Sum("cpus", filter=live), memory=Sum("memory_mb", filter=live)
    )
    return {
        row["node"]: placement.Room(float(row["cpus"] or 0), int(row["memory"] or 0), row["count"])
        for row in rows
    }


NOTHING_USED = placement.Room(0.0, 0, 0)


def serialize_node(node: Node, used: placement.Room | None = None) -> dict[str, Any]:
    """A node on the wire; used: what its sandboxes hold, when the caller has it (node.list asks once)."""
    if used is None:
        used = used_by_node(node.id).get(node.id, NOTHING_USED)
    return {
        "id": node.id,
        "name": node.name,
        "url": node.url or None,
        "tls": bool(node.cert),
        "labels": node.labels,
        "capacity": capacity_of(node),
        "overrides": node.overrides,
        "used": {"cpus": used.cpus, "memoryMb": used.memory_mb, "sandboxes": used.sandboxes},
        "state": node.state,
        "draining": node.draining,  # also while it is unreachable
        "facts": {"driver": get_driver().kind, "runtimes": get_driver().runtimes()}
        if node.id == LOCAL_NODE
        else node.facts,
        "error": node.error or None,
        "checkedAt": node.checked_at.isoformat() if node.checked_at else None,
        "createdAt": node.created_at.isoformat(),
    }


def capacity_of(node: Node) -> dict[str, Any]:
    """What the node can hold: as probed (the local node: this machine's, cocoond runs next to its
    engine), then the admin's overrides."""
    probed = node.capacity
    if node.id == LOCAL_NODE:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        probed = {
            "cpus": (os.cpu_count() or 1) * CPU_OVERCOMMIT,
            "memoryMb": memory // 2**20 * MEMORY_OVERCOMMIT,
            "maxSandboxes": MAX_SANDBOXES,
        }
    return {**probed, **node.overrides}


def _announce(node: Node, key: str, actor: Actor | None) -> None:
    activity.record(key, {"name": node.name, "error": node.error}, actor=actor)
    events.publish("node.updated", serialize_node(node))


def list_nodes() -> list[Node]:
    """The local node first, then the others by name."""
    return [local_node(), *Node.objects.exclude(pk=LOCAL_NODE)]


def get_node(node_id: str) -> Node:
    if node_id == LOCAL_NODE:
        return local_node()
    return get_or_not_found(Node.objects.all(), node_id, _("Node %(id)s does not exist."), id=node_id)


def add_node(
    *,
    actor: Actor,
    name: str,
    url: str,
    tls: Tls | None,
    labels: dict[str, str],
    overrides: dict[str, Any],
) -> Node:
    """Check that the engine answers (with this TLS material) and take it in, ready; nothing is kept
    when it does not."""
    if not URL.fullmatch(url):
        raise field_error("url", _("Must be tcp://host:port."))
    if tls is None:
        # Its API is root on that host: never reachable without cocoon's certificate.
        raise field_error("tls", _("An engine reached over tcp:// needs tls (ca, cert, key)."), "required")
    if name == LOCAL_NAME or Node.objects.filter(name=name).exists():
        raise Conflict(_("A node named %(name)s exists already."), name=name)
    node = Node(name=name, url=url, ca=tls.ca, cert=tls.cert)
    folder = settings.DATA_DIR / "nodes" / node.id
    try:
        facts, capacity = probe(url, remote.tls_config(folder, tls.ca, tls.cert, tls.key))
        taken = _node_of_engine(facts["engineId"])
    except Exception as error:  # refused, unreachable, a certificate that does not match, not an engine
        shutil.rmtree(folder, ignore_errors=True)
        raise field_error(
            "url",
            interpolate_lazy(
                _("The engine at %(url)s did not answer: %(error)s"), {"url": url, "error": error}
            ),
            "unreachable",
        ) from None
    if taken:
        shutil.rmtree(folder, ignore_errors=True)
        raise Conflict(_("The engine at %(url)s is node %(name)s already."), url=url, name=taken)
    node.labels, node.overrides, node.facts, node.capacity = labels, overrides, facts, capacity
    node.checked_at = timezone.now()
    try:
        with transaction.atomic():
            node.save()
            vault.set_secret(key_secret(node.id), tls.key, actor=actor)
            activity.record("node.added", {"name": name}, actor=actor)
            events.publish("node.updated", serialize_node(node))
            from sandboxes.tasks import prepare_node

            transaction.on_commit(lambda: prepare_node.delay(node.id))
    except BaseException as error:
        shutil.rmtree(folder, ignore_errors=True)
        if isinstance(error, IntegrityError):  # added by another call meanwhile
            raise Conflict(_("A node named %(name)s exists already."), name=name) from None
        raise
    return node


def _node_of_engine(engine_id: str) -> str | None:
    """The name of the node that is this engine already (the local one too), if any: one engine taken
    in twice would be counted, placed on and reconciled twice."""
    if not engine_id:
        return None
    if engine_id == get_driver().engine_id():
        return LOCAL_NAME
    return next(
        (
            node.name
            for node in Node.objects.exclude(pk=LOCAL_NODE)
            if node.facts.get("engineId") == engine_id
        ),
        None,
    )


def update_node(
    node_id: str,
    *,
    actor: Actor,
    labels: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Node:
    node = get_node(node_id)
    if labels is not None:
        node.labels = labels
    if overrides is not None:
        node.overrides = overrides
    with transaction.atomic():
        node.save(update_fields=["labels", "overrides", "updated_at"])  # not what a check writes
        _announce(node, "node.updated", actor)
    return node


def drain_node(node_id: str, *, actor: Actor, undrain: bool = False, stop: bool = False) -> Node:
    """No new sandboxes there (undrain: they may go there again), also while and after it is away;
    with stop, its running sandboxes are stopped."""
    node = get_node(node_id)
    with transaction.atomic():
        Node.objects.filter(pk=node.pk).update(draining=not undrain, updated_at=timezone.now())
        node.refresh_from_db()
        _announce(node, "node.updated" if undrain else "node.draining", actor)
    if stop and not undrain:
        from sandboxes.services import stop_sandbox

        running = Sandbox.objects.filter(node=node.id, state=SandboxState.RUNNING)
        for sandbox_id in running.values_list("pk", flat=True):
            stop_sandbox(sandbox_id, actor=actor)
    return node


def remove_node(node_id: str, *, actor: Actor) -> None:
    """Forget a node that holds no sandboxes (the local one stays)."""
    node = get_node(node_id)
    if node.id == LOCAL_NODE:
        raise Conflict(_("The local node cannot be removed."))
    # Drained first, committed: no create chooses it from now on; one that chose it before made its
    # row right after choosing, so the check below sees it.
    Node.objects.filter(pk=node.id).update(draining=True)
    if Sandbox.objects.filter(node=node.id).exists():
        Node.objects.filter(pk=node.id).update(draining=node.draining)
        raise Conflict(_("Node %(name)s still holds sandboxes: delete them first."), name=node.name)
    driver = node_driver(node.id)
    with transaction.atomic():
        node.delete()
        vault.delete_secret(key_secret(node_id), actor=actor, missing_ok=True)
        activity.record("node.removed", {"name": node.name}, actor=actor)
        events.publish("node.removed", {"id": node_id})
    # What cocoon made there goes too (its egress proxy, networks, the toolbox volume); a node that does
    # not answer keeps them, as it would keep anything of a server it no longer hears from.
    if node.reachable:
        try:
            driver.remove_instance_objects()
        except Exception:
            logger.warning("could not remove what this instance made on node %s", node.name, exc_info=True)
    with _lock:
        _drivers.pop(node_id, None)
    shutil.rmtree(settings.DATA_DIR / "nodes" / node_id, ignore_errors=True)


# -- health ---------------------------------------------------------------------------------------


def check_nodes() -> int:
    """Ask every remote node's engine whether it answers (a beat task; the nodes at once, one tick at
    a time per process: a tick that finds one under way is skipped). A node that has not answered for
    UNREACHABLE_AFTER_S is unreachable and its sandboxes missing; one that answers again is reachable
    and reconcile finds its sandboxes. Returns how many nodes changed."""
    if not _checking.acquire(blocking=False):
        return 0
    try:
        return sum(each_node(_checked, list(Node.objects.exclude(pk=LOCAL_NODE))))
    finally:
        _checking.release()


_checking = threading.Lock()


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


def _checked(node: Node) -> int:
    try:
        return check_node(node)
    except Exception:  # one node's trouble must not keep the others unchecked
        logger.exception("could not check node %s", node.name)
        return 0


def check_node(node: Node) -> int:
    nodes = Node.objects.filter(pk=node.pk)
    try:
        facts, capacity = probe(node.url, _engine_tls(node))
    except Exception as error:
        # One slow answer is no outage: unreachable once it has not answered for a while.
        silent_since = timezone.now() - timedelta(seconds=UNREACHABLE_AFTER_S)
        nodes.update(error=str(error)[:500])
        went = nodes.filter(reachable=True, checked_at__lt=silent_since).update(
            reachable=False, updated_at=timezone.now()
        )
        node.refresh_from_db()
        if node.reachable:
            return 0
        if went:
            _announce(node, "node.unreachable", None)
        _mark_missing(node)  # every time: a sandbox that was running meanwhile (or a failed mark)
        return went
    back = nodes.filter(reachable=False).update(reachable=True, updated_at=timezone.now())
    nodes.update(facts=facts, capacity=capacity, error="", checked_at=timezone.now())
    if back:
        node.refresh_from_db()
        _announce(node, "node.back", None)
        from sandboxes.services import reconcile_node

        reconcile_node(node.id)
    return back


def _mark_missing(node: Node) -> None:
    from sandboxes.services import set_missing

    reason = _("Its node %(name)s does not answer.") % {"name": node.name}
    away = Sandbox.objects.filter(node=node.id).exclude(
        state__in=[SandboxState.CREATING, SandboxState.MISSING]
    )
    for sandbox in away:
        try:
            set_missing(sandbox, str(reason))
        except Exception:  # deleted meanwhile
            logger.info("could not mark sandbox %s of node %s missing", sandbox.id, node.name)


# -- placement ------------------------------------------------------------------------------------


def choose_node(demand: placement.Demand, node: str = "") -> str:
    """The node a new sandbox goes to: the one asked for (if it can take it), else the one placement
    picks among those that match (settings sandbox.placement: spread or pack). With no node but the
    local one, and none asked for, it is the local one: a single host places nothing."""
    if not node and not demand.labels and not several_nodes():
        return LOCAL_NODE
    if (picked := _place(demand, node)) is None:
        raise field_error(
            "node" if node else "nodeLabels" if demand.labels else "network",
            _("No node can take this sandbox now (its state, labels, runtimes, network modes or room)."),
            "no_node",
        )
    return picked.id


def choose_among(names: set[str], demand: placement.Demand, node: str = "") -> tuple[str, str] | None:
    """choose_node() among these nodes only (by name: those with a warm pool), as (id, name); None when
    none of them fits."""
    if not node and not demand.labels and not several_nodes():
        return (LOCAL_NODE, LOCAL_NAME) if LOCAL_NAME in names else None
    picked = _place(demand, node, names)
    return (picked.id, picked.name) if picked else None


def _place(demand: placement.Demand, node: str, among: set[str] | None = None) -> placement.Candidate | None:
    used = used_by_node()
    candidates = [_candidate(found, used.get(found.id, NOTHING_USED)) for found in list_nodes()]
    if node:
        candidates = [candidate for candidate in candidates if node in {candidate.id, candidate.name}]
        if not candidates:
            message = interpolate_lazy(_("Node %(id)s does not exist."), {"id": node})
            raise field_error("node", message, "not_found")
    if among is not None:  # a claim takes a member that is counted already: it needs no more room
        candidates = [
            replace(candidate, used=_less(candidate.used, demand))
            for candidate in candidates
            if candidate.name in among
        ]
    return placement.place(candidates, demand, config.get_settings()["sandbox"]["placement"])


def _less(used: placement.Room, demand: placement.Demand) -> placement.Room:
    return placement.Room(
        max(used.cpus - demand.cpus, 0.0),
        max(used.memory_mb - demand.memory_mb, 0),
        max(used.sandboxes - 1, 0),
    )


def several_nodes() -> bool:
    """Whether there is a node but the local one (else a runtime is the local engine's to check)."""
    return Node.objects.exclude(pk=LOCAL_NODE).exists()


def _candidate(node: Node, used: placement.Room) -> placement.Candidate:
    capacity = capacity_of(node)
    local = node.id == LOCAL_NODE
    return placement.Candidate(
        id=node.id,
        name=node.name,
        ready=node.reachable and not node.draining,
        labels=node.labels,
        runtimes=frozenset(get_driver().runtimes() if local else node.facts.get("runtimes", ())),
        networks=frozenset(NetworkMode.values),
        capacity=placement.Room(
            float(capacity["cpus"]), int(capacity["memoryMb"]), int(capacity["maxSandboxes"])
        ),
        used=used,
    )
