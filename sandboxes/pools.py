"""Warm pools: per template in settings.sandbox.pools, sandboxes kept started for sandbox.create to claim.

A member is an ordinary Sandbox row whose `pool` holds its template's key (a hash of the template's
options, defaults applied), so reconcile, the engine objects and removal work as for any sandbox. Until
a create claims it no method shows or reaches it (`Sandbox.objects.claimed()`), so nothing ever runs in
it: a claim hands out a sandbox exactly as a cold create leaves it (clean workspace, baseline tag).
Claiming is one conditional UPDATE of one row, so two creates never get the same member. Templates,
sizes and the cap are read afresh on each refill: a changed template is a new key, and the members of
the old one are surplus.
"""

import hashlib
import json
import logging
import threading
from dataclasses import asdict, dataclass
from typing import Any

from celery import current_app
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import config
from cocoon.actors import Actor
from cocoon.errors import Conflict
from sandboxes import services
from sandboxes.choices import SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError, SandboxDriver
from sandboxes.models import Sandbox

logger = logging.getLogger(__name__)

# The pool field of a member being removed: no template has this key, so no claim can take it.
REMOVING = "-"
# Members the engine no longer runs that a claim meets before it gives up and creates cold: a host
# restart stops them all at once, and reconcile has yet to notice.
DEAD_TRIES = 2
REFILL_TASK = "sandboxes.tasks.refill_pools"
# A refill ends after this many rounds and the next beat goes on: a template whose members never come up
# running (made, found wanting, removed, made again) cannot keep a worker busy for ever.
MAX_ROUNDS = 100


@dataclass(frozen=True)
class Pool:
    key: str
    size: int
    options: services.Options


@dataclass(frozen=True)
class Created:
    """What a create made: the sandbox, and whether it came warm from a pool."""

    sandbox: Sandbox
    from_pool: bool


def template_key(options: services.Options) -> str:
    return hashlib.sha256(json.dumps(asdict(options), sort_keys=True).encode()).hexdigest()[:32]


def configured_pools(document: dict[str, Any]) -> dict[str, Pool]:
    """The pools of a settings document by key. Pure: no engine, no database."""
    defaults = document["sandbox"]
    pools = {}
    for template in defaults["pools"]:
        options = services.options_from(defaults, **{k: v for k, v in template.items() if k != "size"})
        key = template_key(options)
        pools[key] = Pool(key, template["size"], options)
    return pools


def match(options: services.Options, document: dict[str, Any]) -> str | None:
    """The key of the pool whose template is exactly these options, if one has a size. Name and labels
    are no part of a template: a claim applies them."""
    pool = configured_pools(document).get(template_key(options))
    return pool.key if pool and pool.size > 0 else None


def create_sandbox(*, actor: Actor, name: str | None = None, pool: bool = True, **options: Any) -> Created:
    """sandbox.create: a warm sandbox claimed from the pool of these options, else a cold one. pool False
    skips the pools."""
    resolved = services.resolve_options(actor=actor, **options)
    key = match(resolved, config.get_settings()) if pool else None
    if key is None:
        return Created(services.make_sandbox(resolved, name=name, actor=actor), from_pool=False)
    # Claimed or found empty: either way it is short of members now.
    transaction.on_commit(lambda: current_app.send_task(REFILL_TASK))
    sandbox = claim(key, name=name, actor=actor)
    if sandbox is not None:
        return Created(sandbox, from_pool=True)
    return Created(services.make_sandbox(resolved, name=name, actor=actor), from_pool=False)


def claim(key: str, *, name: str | None, actor: Actor) -> Sandbox | None:
    """A running member of pool key, now an ordinary sandbox named name (created now), or None."""
    driver = get_driver()
    waiting = Sandbox.objects.filter(pool=key, state=SandboxState.RUNNING).order_by("created_at")
    dead = 0
    for sandbox_id in list(waiting.values_list("id", flat=True)):
        # The row says running as of reconcile's last look; the engine says so now.
        if driver.inspect(sandbox_id).state != SandboxState.RUNNING:
            dead += 1  # reconcile removes it, the refill replaces it
            if dead == DEAD_TRIES:
                return None
            continue
        now = timezone.now()
        try:
            with transaction.atomic():
                taken = Sandbox.objects.filter(pk=sandbox_id, pool=key, state=SandboxState.RUNNING).update(
                    pool="", name=name or sandbox_id, created_at=now, updated_at=now
                )
        except IntegrityError:
            raise Conflict(_("A sandbox named %(name)s exists already."), name=name) from None
        if taken:  # else a concurrent create took it first: the next one
            sandbox = Sandbox.objects.get(pk=sandbox_id)
            services.announce_created(sandbox, actor)
            return sandbox
    return None


_refilling = threading.Lock()


def refill() -> int:
    """Bring every pool to its size within settings.sandbox.poolCap: members of removed or changed
    templates, of a rebuilt image, beyond a size or no longer running go; new ones are made one by one
    (each round reads the pools again, so a claim meanwhile is seen). Returns how many came or went."""
    if not _refilling.acquire(blocking=False):
        return 0  # this process refills already; its next round sees whatever kicked this one
    try:
        changed = 0
        for _round in range(MAX_ROUNDS):
            step = _refill_step()
            if step is None:
                break
            changed += step
        return changed
    finally:
        _refilling.release()


def _refill_step() -> int | None:
    """One round: remove what must go, or make one member; None when there is nothing to do."""
    document = config.get_settings()
    pools = configured_pools(document)
    driver = get_driver()
    image_ids = {pool.options.image: _image_id(driver, pool.options.image) for pool in pools.values()}
    members = Sandbox.objects.exclude(pool="").order_by("-created_at")
    leaving = [member for member in members if _must_go(member, pools, image_ids)]
    counts: dict[str, int] = {}
    for member in members:
        if member not in leaving:
            counts[member.pool] = counts.get(member.pool, 0) + 1
            pool = pools.get(member.pool)
            if pool and counts[member.pool] > pool.size and member.state == SandboxState.RUNNING:
                leaving.append(member)  # surplus, the newest first
                counts[member.pool] -= 1
    if leaving:
        return sum(_remove(member) for member in leaving)
    room = document["sandbox"]["poolCap"] - sum(counts.values())
    for pool in pools.values():
        image_id = image_ids[pool.options.image]
        if room > 0 and counts.get(pool.key, 0) < pool.size and image_id is not None:
            try:
                services.make_sandbox(
                    pool.options, name=None, actor=None, pool=pool.key, pool_image_id=image_id
                )
            except Exception:
                # A template the engine refuses (a bad repo, an unknown runtime) waits for the next beat.
                logger.exception("could not make a member of pool %s", pool.key)
                return None
            return 1
    return None


def _image_id(driver: SandboxDriver, image: str) -> str | None:
    """The engine's id of image, "" for a driver without images, None when the engine lacks it."""
    try:
        info = driver.image_info(image)
    except DriverError:
        return ""
    return info.id if info else None


def _must_go(member: Sandbox, pools: dict[str, Pool], image_ids: dict[str, str | None]) -> bool:
    if member.state == SandboxState.CREATING:
        return False  # its create is under way (reconcile undoes one that was interrupted)
    pool = pools.get(member.pool)
    if pool is None or member.state != SandboxState.RUNNING:
        return True
    current = image_ids[pool.options.image]
    return bool(current) and member.pool_image_id != current


def _remove(member: Sandbox) -> int:
    """Remove a member unless a create claimed it meanwhile: the same conditional UPDATE as a claim."""
    if not Sandbox.objects.filter(pk=member.pk, pool=member.pool).update(pool=REMOVING):
        return 0
    services.discard(member)
    return 1


def info() -> dict[str, Any]:
    """system.info's part about the pools: one query (system.info is called often; the cap is in the
    settings)."""
    members = Sandbox.objects.exclude(pool="").exclude(pool=REMOVING)
    return {
        "pool": members.aggregate(
            ready=Count("id", filter=Q(state=SandboxState.RUNNING)),
            starting=Count("id", filter=Q(state=SandboxState.CREATING)),
        )
    }
