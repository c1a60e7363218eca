"""Reconcile: the rows aligned with what the engines report (state, IPs), engine objects no row owns
removed, creates a dead process left half made undone; and a sandbox whose node does not answer marked
missing until reconcile finds it again."""

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import activity, events, tenancy
from cocoon.actors import Actor
from cocoon.errors import NotFound
from sandboxes import networking
from sandboxes.baseline import CLONE_TIMEOUT_S
from sandboxes.choices import NetworkMode, SandboxState
from sandboxes.drivers.base import DriverError
from sandboxes.models import POOL_REMOVING, Sandbox
from sandboxes.nodes import node_driver, reachable_nodes
from sandboxes.services import announce_created, apply_state, discard, new_row, remove_member
from sandboxes.types import ForeignSandbox

logger = logging.getLogger(__name__)

activity.register_messages(
    {
        "engine.removed": _("What another data directory (%(data)s) left of sandbox %(id)s was removed."),
        "engine.adopted": _("Sandbox %(id)s, left by another data directory (%(data)s), was adopted."),
    }
)

# Longer than any create takes (the clone is its longest part): a row still creating after this has lost
# the process that made it.
CREATE_GRACE_S = CLONE_TIMEOUT_S + 300


def reconcile(interrupted_after_s: float = CREATE_GRACE_S) -> int:
    """Align rows with the engine (state, IPs) and remove engine objects no row owns.

    Returns how many sandboxes changed. Safe to run any time: creates in progress have their row first.
    A row still `creating` after interrupted_after_s belongs to a create whose process died (SIGKILL,
    a crash): it is undone like a failed create, so no sandbox stays half made. cocoond's start passes 0
    when its embedded worker was the only creator.
    """
    changed = 0
    cutoff = timezone.now() - timedelta(seconds=interrupted_after_s)
    for sandbox in Sandbox.objects.filter(state=SandboxState.CREATING, created_at__lte=cutoff):
        logger.warning("undoing the interrupted create of sandbox %s", sandbox.id)
        try:
            discard(sandbox)
            if not sandbox.pool:  # a pool member was never announced
                activity.record(
                    "sandbox.interrupted", {"name": sandbox.name}, actor=None, sandbox_id=sandbox.id
                )
                events.publish("sandbox.deleted", {"id": sandbox.id}, sandbox_id=sandbox.id)
            changed += 1
        except Exception:
            logger.exception("could not undo the interrupted create of sandbox %s", sandbox.id)
    for node in reachable_nodes():
        try:
            changed += reconcile_node(node)
        except Exception:  # one node's engine failing must not stop the others' alignment
            logger.exception("could not reconcile the sandboxes of node %s", node)
    return changed


def reconcile_node(node: str) -> int:
    """reconcile() on one node's engine: its rows aligned, objects no row owns removed."""
    driver = node_driver(node)
    changed = 0
    for sandbox in Sandbox.objects.filter(node=node).exclude(state=SandboxState.CREATING):
        try:
            changed += _align_member(driver, sandbox) if sandbox.pool else _align(driver, sandbox)
        except Exception:
            # One sandbox the engine or the database trips over must not stop the others' alignment.
            logger.exception("could not align sandbox %s with the engine", sandbox.id)
    # The engine first, the rows second: a create commits its row before it makes engine objects, so
    # every object listed here has its row by the time the rows are read. The other order took a
    # sandbox created in between for an orphan.
    engine = driver.list_ids()
    known = set(Sandbox.objects.values_list("id", flat=True))
    orphans = engine - known
    if orphans:  # and still there: a delete under way when the engine was listed removes its row last;
        # and this data directory's (or made before data ids), or a pool member nobody claimed (no one's
        # work: the refill replaces it): another's sandboxes are left for an admin to judge.
        still = driver.owners()
        others = {orphan for orphan in orphans if orphan in still and foreign(still[orphan])}
        unclaimed = driver.members() if others else set()
        orphans = {orphan for orphan in orphans if orphan in still and orphan not in others - unclaimed}
    for orphan in orphans:
        logger.warning("removing orphaned sandbox objects of %s", orphan)
        driver.remove(orphan)
    return changed


def foreign(data: str) -> bool:
    """Whether objects labelled with this data directory id are another data directory's: never
    removed by reconcile (their workspace is someone's work), listed by foreign_sandboxes() instead.
    Objects made before data ids ("") are this one's, as they always were."""
    return data not in ("", settings.COCOON_DATA_ID)


def foreign_sandboxes() -> list[ForeignSandbox]:
    """Sandboxes another data directory left on the engines under this instance's name (no row here)."""
    found, known = [], set(Sandbox.objects.values_list("id", flat=True))
    for node in reachable_nodes():
        try:
            owners = node_driver(node).owners()
        except DriverError:
            logger.warning("could not list the sandboxes of node %s", node, exc_info=True)
            continue
        found += [
            ForeignSandbox(sandbox_id=sandbox_id, node=node, data=data)
            for sandbox_id, data in sorted(owners.items())
            if foreign(data) and sandbox_id not in known
        ]
    return found


def remove_foreign(sandbox_id: str, *, actor: Actor) -> None:
    """Remove what another data directory left of a sandbox (its container, workspace, network)."""
    left = _foreign(sandbox_id)
    node_driver(left.node).remove(sandbox_id)
    activity.record("engine.removed", {"id": sandbox_id, "data": left.data}, actor=actor)


def adopt_foreign(sandbox_id: str, *, name: str | None, actor: Actor) -> Sandbox:
    """Make what another data directory left of a sandbox this one's: a row from what its engine objects
    say it was made as, its network in force again, announced like a new sandbox. Its workspace is
    kept as it is; agents running in it are not adopted (their rows went with the old data)."""
    left = _foreign(sandbox_id)
    driver = node_driver(left.node)
    found = driver.describe(sandbox_id)
    observed = driver.inspect(sandbox_id)
    sandbox = new_row(
        sandbox_id,
        found,
        name=name,
        driver=driver.kind,
        node=left.node,
        owner=tenancy.creation(actor),
        state=observed.state,
        ips=observed.ips,
    )
    driver.release_member(sandbox_id)  # an adopted pool member is a sandbox like any other
    if sandbox.network != NetworkMode.NONE and sandbox.state == SandboxState.RUNNING:
        networking.attached(sandbox, wait=True)
    activity.record("engine.adopted", {"id": sandbox_id, "data": left.data}, actor=actor)
    announce_created(sandbox, actor)
    return sandbox


def _foreign(sandbox_id: str) -> ForeignSandbox:
    left = next((each for each in foreign_sandboxes() if each.sandbox_id == sandbox_id), None)
    if left is None:
        raise NotFound(_("No sandbox %(id)s of another data directory is on the engines."), id=sandbox_id)
    return left


def set_missing(sandbox: Sandbox, reason: str) -> None:
    """The sandbox cannot be reached (its node does not answer): missing, with the reason, until
    reconcile finds it again."""
    sandbox.error = reason
    sandbox.save(update_fields=["error", "updated_at"])
    apply_state(sandbox, SandboxState.MISSING, sandbox.ips, "sandbox.missing", None)


def _align_member(driver: Any, sandbox: Sandbox) -> int:
    """A pool member the engine no longer runs (stopped by a host restart, gone) is of no use to a claim:
    it is removed quietly, and the pools' refill makes a new one. So is one whose removal was cut off."""
    if sandbox.pool != POOL_REMOVING and driver.inspect(sandbox.id).state == SandboxState.RUNNING:
        return 0
    logger.info("removing pool member %s: the engine no longer runs it", sandbox.id)
    return remove_member(sandbox)


def _align(driver: Any, sandbox: Sandbox) -> int:
    observed = driver.inspect(sandbox.id)
    if sandbox.error:  # its node answered: the reason (it did not) is past, whatever it found
        sandbox.error = ""
        sandbox.save(update_fields=["error"])
    if (observed.state, observed.ips) == (sandbox.state, sandbox.ips):
        return 0
    key = "sandbox.missing" if observed.state == SandboxState.MISSING else None
    try:
        apply_state(sandbox, observed.state, observed.ips, key, None)
    except DatabaseError:
        if Sandbox.objects.filter(pk=sandbox.pk).exists():
            raise
        return 0  # deleted meanwhile (its objects go first, so it looked missing): no news
    return 1
