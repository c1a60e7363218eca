"""Nodes' health: every remote node's engine asked whether it answers (a beat task). A node that has not
answered for a while is unreachable and its sandboxes missing; one that answers again is reachable, and
reconcile finds its sandboxes."""

import logging
import threading
from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from sandboxes.capacity import probe
from sandboxes.choices import SandboxState
from sandboxes.models import LOCAL_NODE, Node, Sandbox
from sandboxes.node_services import announce
from sandboxes.nodes import each_node, engine_tls
from sandboxes.reconcile import reconcile_node, set_missing

logger = logging.getLogger(__name__)

UNREACHABLE_AFTER_S = 8  # a node whose checks have failed for this long is unreachable


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


def _checked(node: Node) -> int:
    try:
        return check_node(node)
    except Exception:  # one node's trouble must not keep the others unchecked
        logger.exception("could not check node %s", node.name)
        return 0


def check_node(node: Node) -> int:
    nodes = Node.objects.filter(pk=node.pk)
    try:
        facts, capacity = probe(node.url, engine_tls(node))
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
            announce(node, "node.unreachable", None)
        _mark_missing(node)  # every time: a sandbox that was running meanwhile (or a failed mark)
        return went
    back = nodes.filter(reachable=False).update(reachable=True, updated_at=timezone.now())
    nodes.update(facts=facts, capacity=capacity, error="", checked_at=timezone.now())
    if back:
        node.refresh_from_db()
        announce(node, "node.back", None)
        reconcile_node(node.id)
    return back


def _mark_missing(node: Node) -> None:
    reason = _("Its node %(name)s does not answer.") % {"name": node.name}
    away = Sandbox.objects.filter(node=node.id).exclude(
        state__in=[SandboxState.CREATING, SandboxState.MISSING]
    )
    for sandbox in away:
        try:
            set_missing(sandbox, str(reason))
        except Exception:  # deleted meanwhile
            logger.info("could not mark sandbox %s of node %s missing", sandbox.id, node.name)
