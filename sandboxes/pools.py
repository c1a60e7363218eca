"""Warm pools: per template in settings.sandbox.pools, sandboxes kept started for sandbox.create to claim.

A member is an ordinary Sandbox row whose `pool` holds its template's key (a hash of the template's
options, defaults applied), so reconcile, the engine objects and removal work as for any sandbox. Until
a create claims it no method shows or reaches it (`Sandbox.objects.claimed()`), so nothing ever runs in
it: a claim hands out a sandbox exactly as a cold create leaves it (clean workspace, baseline tag).
Claiming is one conditional UPDATE of one row, so two creates never get the same member. Templates,
sizes and the cap are read afresh on each refill: a changed template is a new key, and the members of
the old one are surplus.
"""

import contextlib
import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import redis
from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import config, tenancy
from cocoon.actors import Actor
from cocoon.errors import Conflict
from cocoon.settings_schema import LOCAL_NODE_NAME
from sandboxes import node_choice, nodes, placement, services
from sandboxes.choices import SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError, SandboxDriver
from sandboxes.models import LOCAL_NODE, POOL_REMOVING, Sandbox

logger = logging.getLogger(__name__)

# Members the engine no longer runs that a claim meets before it gives up and creates cold: a host
# restart stops them all at once, and reconcile has yet to notice.
DEAD_TRIES = 2
REFILL_TASK = "sandboxes.tasks.refill_pools"
# A refill ends after this long and the next beat goes on: a template whose members never come up
# running (made, found wanting, removed, made again) cannot keep a worker busy for ever.
REFILL_S = 60
LOCK_SLACK_S = 60  # the refill lock outlives a refill by this much (a member's create under way)
REPO_MEMBER_MAX_AGE = timedelta(hours=1)


@dataclass(frozen=True)
class Pool:
    key: str
    size: int
    options: services.Options
    node: str = LOCAL_NODE_NAME  # the name of the node whose engine keeps the members


@dataclass(frozen=True)
class Created:
    """What a create made: the sandbox, and whether it came warm from a pool."""

    sandbox: Sandbox
    from_pool: bool


def template_key(options: services.Options, node: str = LOCAL_NODE_NAME) -> str:
    """All a member is made of (settings included, e.g. readOnlyRoot), and where: a member made before
    any of it changed belongs to no pool any more, and is replaced."""
    template = asdict(options) | ({} if node == LOCAL_NODE_NAME else {"node": node})
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:32]


def configured_pools(document: dict[str, Any]) -> dict[str, Pool]:
    """The pools of a settings document by key (templates that come out the same are one pool of both
    sizes). Pure: no engine, no database."""
    defaults = document["sandbox"]
    pools: dict[str, Pool] = {}
    for template in defaults["pools"]:
        fields = {k: v for k, v in template.items() if k not in {"size", "node"}}
        options, node = services.options_from(defaults, **fields), template.get("node", LOCAL_NODE_NAME)
        key = template_key(options, node)
        size = template["size"] + (pools[key].size if key in pools else 0)
        pools[key] = Pool(key, size, options, node)
    return pools


def match(options: services.Options, document: dict[str, Any]) -> dict[str, str]:
    """The keys of the pools whose template is exactly these options and that have a size, by node
    name. Name and labels are no part of a template: a claim applies them."""
    pools = configured_pools(document)
    return {
        pool.node: pool.key
        for pool in pools.values()
        if pool.size > 0 and pool.key == template_key(options, pool.node)
    }


def create_sandbox(
    *,
    actor: Actor,
    name: str | None = None,
    pool: bool = True,
    budget: dict[str, Any] | None = None,
    project: str | None = None,
    **options: Any,
) -> Created:
    """sandbox.create: a warm sandbox claimed from the pool of these options, else a cold one, within its
    project's quotas. pool False skips the pools."""
    node, labels = options.pop("node", ""), options.pop("nodeLabels", None)
    if project is not None:
        tenancy.project_named(project, actor)
    limits = (resolved := services.resolve_options(actor=actor, **options)).limits
    demand = placement.Demand(limits.cpus, limits.memory_mb, resolved.network, resolved.runtime, labels or {})
    owner = tenancy.creation(actor, project)["project_id"]
    # Within its project's quotas, and a budget carved out of its maker's if its token has a budget ceiling.
    with services.within_quota(owner, limits, actor.user), tenancy.carving(actor, budget) as budget:
        # A node with a warm pool of these options comes first, if one can take the sandbox (as placement
        # would, among those nodes only): a claim saves a create.
        keys = match(resolved, config.get_settings()) if pool else {}
        warm = node_choice.choose_among(set(keys), demand, node) if keys else None
        if warm is not None:
            node_id, node_name = warm
            sandbox = claim(
                keys[node_name], resolved.image, node_id, name=name, actor=actor, budget=budget, project=owner
            )
            _kick_refill()  # claimed or found empty: either way it is short of members now
            if sandbox is not None:
                return Created(sandbox, from_pool=True)
        made = services.make_sandbox(
            resolved,
            name=name,
            actor=actor,
            budget=budget,
            node=node_choice.choose_node(demand, node),
            project=owner,
        )
    return Created(made, from_pool=False)


def _kick_refill() -> None:
    try:
        current_app.send_task(REFILL_TASK)
    except Exception:  # the broker away: the beat refills later, and this create goes on
        logger.warning("could not ask for a refill of the pools", exc_info=True)


def claim(
    key: str,
    image: str,
    node: str = LOCAL_NODE,
    *,
    name: str | None,
    actor: Actor,
    budget: dict[str, Any] | None = None,
    project: str | None = None,
) -> Sandbox | None:
    """A running member of pool key made from the image as node's engine has it now, from then on an
    ordinary sandbox named name (created now), actor's (tenancy.creation); None when there is none."""
    driver = nodes.node_driver(node)
    waiting = Sandbox.objects.filter(pool=key, state=SandboxState.RUNNING).order_by("created_at")
    if current := _image_id(driver, image):  # a rebuild's refill may not have replaced them yet
        waiting = waiting.filter(pool_image_id=current)
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
                    pool="",
                    name=name or sandbox_id,
                    budget=budget,
                    created_at=now,
                    updated_at=now,
                    **tenancy.creation(actor, project),
                )
                if taken:  # else a concurrent create took it first: the next one
                    # Its engine mark goes with the claim, or neither: a member whose data directory is
                    # lost is removed unasked only while marked (reconcile).
                    driver.release_member(sandbox_id)
                    sandbox = Sandbox.objects.get(pk=sandbox_id)
                    services.announce_created(sandbox, actor)  # with the claim, or neither
                    return sandbox
        except IntegrityError:
            raise Conflict(_("A sandbox named %(name)s exists already."), name=name) from None
        except DriverError:  # its mark would not go: it stays a member, the next one is claimed
            logger.warning("could not claim pool member %s", sandbox_id, exc_info=True)
    return None


def refill() -> int:
    """Bring every pool to its size within settings.sandbox.poolCap: members of removed or changed
    templates, of a rebuilt image, of a repo cloned too long ago, beyond a size or the cap, or no longer
    running go; new ones are made one by one (each round reads the pools again, so a claim meanwhile is
    seen). One refill at a time across all processes; it stops after REFILL_S and the next beat goes on.
    Returns how many members came or went."""
    with refill_lock() as held:
        if not held:
            return 0  # one is under way; its next round sees whatever asked for this one
        changed, failed = 0, set[str]()
        deadline = time.monotonic() + REFILL_S
        while time.monotonic() < deadline:
            step = _refill_step(failed)
            if step is None:
                break
            changed += step
        return changed


@contextmanager
def refill_lock() -> Iterator[bool]:
    """Whether this caller may refill: a Redis lock shared by every process with REDIS_URL (the worker's
    prefork children each take tasks), a lock of this process without it (the embedded worker)."""
    if not settings.REDIS_URL:
        held = _local_lock.acquire(blocking=False)
        try:
            yield held
        finally:
            if held:
                _local_lock.release()
        return
    lock = _redis(settings.REDIS_URL).lock(
        f"cocoon:{settings.COCOON_INSTANCE}:pools:refill", timeout=REFILL_S + LOCK_SLACK_S
    )
    held = lock.acquire(blocking=False)
    try:
        yield held
    finally:
        if held:
            with contextlib.suppress(redis.RedisError):  # expired meanwhile: another may hold it now
                lock.release()


_local_lock = threading.Lock()


@functools.cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5)


def _refill_step(failed: set[str]) -> int | None:
    """One round: remove what must go, or make one member; None when there is nothing to do. A template
    the engine refuses (a bad repo, an unknown runtime) is skipped for the rest of this refill."""
    document = config.get_settings()
    pools = configured_pools(document)
    driver = get_driver()
    image_ids = {pool.options.image: _image_id(driver, pool.options.image) for pool in pools.values()}
    members = Sandbox.objects.exclude(pool="").exclude(pool=POOL_REMOVING).order_by("-created_at")
    leaving = [member for member in members if _must_go(member, pools, image_ids)]
    counts: dict[str, int] = {}
    for member in members:
        if member not in leaving:
            counts[member.pool] = counts.get(member.pool, 0) + 1
            pool = pools.get(member.pool)
            if pool and counts[member.pool] > pool.size and member.state == SandboxState.RUNNING:
                leaving.append(member)  # surplus, the newest first
                counts[member.pool] -= 1
    # Beyond the cap (it was lowered): the newest members go, whichever their pool.
    staying = [m for m in members if m not in leaving and m.state == SandboxState.RUNNING]
    excess = sum(counts.values()) - document["sandbox"]["poolCap"]
    for member in staying[: max(excess, 0)]:
        leaving.append(member)
        counts[member.pool] -= 1
    if leaving:
        return sum(services.remove_member(member) for member in leaving)
    room = document["sandbox"]["poolCap"] - sum(counts.values())
    ready = {} if nodes.local_node().draining else {LOCAL_NODE_NAME: LOCAL_NODE}
    if any(pool.node != LOCAL_NODE_NAME for pool in pools.values()):
        ready = {node.name: node.id for node in nodes.list_nodes() if node.reachable and not node.draining}
    for pool in pools.values():
        image_id = image_ids[pool.options.image]
        if pool.key in failed or room <= 0 or counts.get(pool.key, 0) >= pool.size or image_id is None:
            continue
        if pool.node not in ready:  # unknown, away or draining: its pool waits
            continue
        try:
            services.make_sandbox(
                pool.options,
                name=None,
                actor=None,
                pool=pool.key,
                pool_image_id=image_id,  # a node is given the local engine's image, id and all
                node=ready[pool.node],
            )
        except Exception:
            logger.exception("could not make a member of pool %s: trying again at the next beat", pool.key)
            failed.add(pool.key)
            continue
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
    if pool.options.repo and timezone.now() - member.created_at > REPO_MEMBER_MAX_AGE:
        return True  # its checkout has aged: a cold create would clone what the remote has now
    current = image_ids[pool.options.image]
    return bool(current) and member.pool_image_id != current


def info() -> dict[str, Any]:
    """system.info's part about the pools: one query (system.info is called often; the cap is in the
    settings)."""
    members = Sandbox.objects.exclude(pool="").exclude(pool=POOL_REMOVING)
    return {
        "pool": members.aggregate(
            ready=Count("id", filter=Q(state=SandboxState.RUNNING)),
            starting=Count("id", filter=Q(state=SandboxState.CREATING)),
        )
    }
