"""Sandbox lifecycle: create (all or nothing), start, stop, delete, exec; what a create's options are.
Reconcile is sandboxes.reconcile's, what a new workspace starts as sandboxes.baseline's."""

import logging
import re
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Sum
from django.utils.translation import gettext_lazy as _

from cocoon import activity, config, events, settings_checks, tenancy
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import Conflict, Forbidden, Timeout, field_error, interpolate_lazy
from cocoon.lookup import get_or_not_found
from sandboxes import networking, signals
from sandboxes.baseline import baseline, clone_repository
from sandboxes.choices import NetworkMode, SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import (
    ExecResult,
    FoundSandbox,
    ImageNotFound,
    Limits,
    SandboxNotFound,
    SandboxSpec,
)
from sandboxes.models import LOCAL_NODE, POOL_REMOVING, Sandbox, new_sandbox_id
from sandboxes.nodes import node_driver, node_reachable, remember_node, several_nodes, ship_image
from sandboxes.schemas import serialize_exec_result, serialize_sandbox

logger = logging.getLogger(__name__)

# Clone sources a sandbox may use: network URLs only. No local paths, no file://, no ext:: helpers,
# nothing that git could read as an option.
REPO_URL = re.compile(r"^(?:(?:https?|git|ssh)://[^\s@/]+(?:@[^\s/]+)?/\S+|[\w.-]+@[\w.-]+:[\w./~-]+)$")
BRANCH = re.compile(r"^(?!-)[\w./-]{1,255}$")

activity.register_messages(
    {
        "sandbox.created": _("Sandbox %(name)s was created."),
        "sandbox.started": _("Sandbox %(name)s was started."),
        "sandbox.stopped": _("Sandbox %(name)s was stopped."),
        "sandbox.renamed": _("Sandbox %(old)s is called %(name)s now."),
        "sandbox.deleted": _("Sandbox %(name)s was deleted."),
        "sandbox.missing": _("The container of sandbox %(name)s is gone."),
        "sandbox.interrupted": _(
            "The creation of sandbox %(name)s was interrupted; what was made of it has been removed."
        ),
    },
    visibility=Visibility.AGENT,
)
events.register_types("sandbox.updated", "sandbox.deleted", visibility=Visibility.AGENT)


def _publish(sandbox: Sandbox) -> None:
    events.publish("sandbox.updated", serialize_sandbox(sandbox), sandbox_id=sandbox.id)


SANDBOX_NOT_FOUND = _("Sandbox %(id)s does not exist.")


def get_sandbox(sandbox_id: str, actor: Actor | None = None) -> Sandbox:
    """The sandbox (one actor may see, if given), never a warm pool's member: nothing may run in one
    before a create claims it. Someone else's answers as a missing one does."""
    sandboxes = Sandbox.objects.claimed() if actor is None else Sandbox.objects.visible_to(actor)
    return get_or_not_found(sandboxes, sandbox_id, SANDBOX_NOT_FOUND, id=sandbox_id)


def check_visible(actor: Actor, sandbox_id: str) -> Sandbox:
    """registry.owned's check of sandboxId: not_found, word for word as for a missing one, unless actor
    may see it; the row, for the handler (Call.row)."""
    return get_sandbox(sandbox_id, actor)


def sandbox_owner(sandbox_id: str) -> tenancy.Owner | None:
    owner = Sandbox.objects.filter(pk=sandbox_id).values_list("project_id", "creator").first()
    return tenancy.Owner(*owner) if owner else None


def _limits(requested: dict[str, Any] | None, defaults: dict[str, Any]) -> Limits:
    limits = defaults["limits"] | (requested or {})
    settings_checks.check_limits(limits, defaults["maxLimits"], "limits")
    return Limits(cpus=float(limits["cpus"]), memory_mb=int(limits["memoryMb"]), pids=int(limits["pids"]))


def check_network_mode(network: str | None, actor: Actor) -> str:
    """The network mode asked for (or the default): agent-scoped tokens may only choose those
    settings.security.agentNetworkModes allows (an open sandbox reaches anything)."""
    document = config.get_settings()
    network = network or document["sandbox"]["network"]
    allowed = document["security"]["agentNetworkModes"]
    if not actor.is_admin and network not in allowed:
        raise Forbidden(
            _("Agent tokens may not choose the network mode %(network)s (allowed: %(allowed)s)."),
            network=network,
            allowed=", ".join(allowed) or "-",
        )
    tenancy.within_ceilings(actor, network=network)
    return network


@dataclass(frozen=True)
class Options:
    """What a sandbox is made of, defaults applied: a create request's options, or a pool's template."""

    image: str
    network: str
    runtime: str
    limits: Limits
    repo: str = ""
    branch: str = ""
    read_only_root: bool = False  # from the settings only: no create asks for it


def options_from(defaults: dict[str, Any], **options: Any) -> Options:
    """The Options of a create's (or a pool template's) fields, unset ones from the settings' sandbox
    defaults. Checks only the limits against their maxima: resolve_options checks the rest of a request."""
    runtime = options.get("runtime")
    return Options(
        image=options.get("image") or defaults["image"],
        network=options.get("network") or defaults["network"],
        runtime=runtime if runtime is not None else defaults["runtime"],
        limits=_limits(options.get("limits"), defaults),
        repo=options.get("repo") or "",
        branch=options.get("branch") or "",
        read_only_root=defaults["readOnlyRoot"],
    )


def resolve_options(*, actor: Actor, **options: Any) -> Options:
    """The checked Options of a create request (image, network, limits, runtime, repo, branch)."""
    defaults = config.get_settings()["sandbox"]
    resolved = options_from(defaults, **_ceilings_as_defaults(actor, defaults, options))
    check_network_mode(resolved.network, actor)
    tenancy.within_ceilings(actor, cpus=resolved.limits.cpus, memory_mb=resolved.limits.memory_mb)
    if resolved.repo and not REPO_URL.match(resolved.repo):
        raise field_error("repo", _("Must be an http(s)://, git://, ssh:// or user@host:path URL."))
    if resolved.branch and not BRANCH.match(resolved.branch):
        raise field_error("branch", _("Has an invalid format."))
    if resolved.runtime and not several_nodes() and resolved.runtime not in get_driver().runtimes():
        raise field_error(
            "runtime",
            interpolate_lazy(_("The engine does not offer %(runtime)s."), {"runtime": resolved.runtime}),
        )
    return resolved


def _ceilings_as_defaults(actor: Actor, defaults: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """options, where a choice left out has a default above the token's ceiling: the ceiling then (its
    first network mode), so a narrowed token need not spell out each thing it may not exceed."""
    ceilings, options = actor.ceilings, dict(options)
    if not options.get("network") and ceilings.networks and defaults["network"] not in ceilings.networks:
        options["network"] = ceilings.networks[0]
    limits = dict(options.get("limits") or {})
    for name, ceiling in (("cpus", ceilings.cpus), ("memoryMb", ceilings.memory_mb)):
        if name not in limits and ceiling is not None and defaults["limits"][name] > ceiling:
            limits[name] = ceiling
    return {**options, "limits": limits} if limits else options


def make_sandbox(
    options: Options,
    *,
    name: str | None,
    actor: Actor | None,
    pool: str = "",
    pool_image_id: str = "",
    budget: dict[str, Any] | None = None,
    node: str = LOCAL_NODE,
    project: str | None = None,
) -> Sandbox:
    """Make a sandbox of checked options on a node, actor's (in project: tenancy.creation), or raise
    leaving nothing behind. A pool member (pool: its template's key) is made quietly, and nobody's: no
    activity entry and no event until a create claims it."""
    driver = node_driver(node)
    sandbox = new_row(
        new_sandbox_id(),
        options,
        name=name,
        driver=driver.kind,
        node=node,
        owner=tenancy.creation(None if pool else actor, project),
        repo=options.repo,
        branch=options.branch,
        pool=pool,
        pool_image_id=pool_image_id,
        budget=budget,
    )

    spec = SandboxSpec(
        sandbox.id,
        options.image,
        options.network,
        options.limits,
        options.runtime,
        read_only_root=options.read_only_root,
        # Its id, not its name: a warm pool's member gets its name only when a create claims it.
        hostname=sandbox.id.replace("_", "-"),  # a hostname has no underscores
        workspace=None if options.repo else baseline(options.branch or "main"),
        pool_member=bool(pool),
    )
    try:
        observed = _create(driver, spec, node)
        if sandbox.network != NetworkMode.NONE:
            # Its network must be in force before anything in it goes out (the clone).
            sandbox.ips = observed.ips
            sandbox.save(update_fields=["ips"])
            networking.attached(sandbox, wait=True)
        if options.repo:
            clone_repository(sandbox)
    except ImageNotFound:
        # Not checked up front: the engine says so on create, which saves a round trip every time.
        discard(sandbox)
        raise field_error(
            "image", interpolate_lazy(_("Unknown image %(image)s."), {"image": options.image})
        ) from None
    except BaseException:
        discard(sandbox)
        raise

    with transaction.atomic():
        sandbox.state = observed.state
        sandbox.ips = observed.ips
        sandbox.save()
        if not pool:
            announce_created(sandbox, actor)
    return sandbox


def new_row(
    sandbox_id: str,
    made: Options | FoundSandbox,
    *,
    name: str | None,
    driver: str,
    node: str,
    owner: dict[str, str],
    **fields: Any,
) -> Sandbox:
    """A sandbox's row of what it is made as (named its id unless name), its owner's (tenancy.creation),
    its node remembered; conflict for a name taken."""
    try:
        with transaction.atomic():
            sandbox = Sandbox.objects.create(
                id=sandbox_id,
                name=name or sandbox_id,
                image=made.image,
                network=made.network,
                cpus=made.limits.cpus,
                memory_mb=made.limits.memory_mb,
                pids=made.limits.pids,
                runtime=made.runtime,
                driver=driver,
                node=node,
                **owner,
                **fields,
            )
    except IntegrityError:
        raise Conflict(_("A sandbox named %(name)s exists already."), name=name) from None
    remember_node(sandbox.id, node)
    return sandbox


def _create(driver: Any, spec: SandboxSpec, node: str) -> Any:
    """The engine's create; a remote node gets the local engine's copy of the image first, if it lacks
    it or has an older one (a local inspect per create; the node's, and the copy, once per image). The
    failed create of an image removed from the node since removed what it made: the retry prepares the
    network again."""
    if node == LOCAL_NODE:
        return driver.create(networking.prepare(spec))
    ship_image(node, spec.image)
    try:
        return driver.create(networking.prepare(spec))
    except ImageNotFound:
        if not ship_image(node, spec.image, recheck=True):
            raise
    return driver.create(networking.prepare(spec))


def announce_created(sandbox: Sandbox, actor: Actor | None) -> None:
    """The activity entry and the event of a new sandbox (made, or claimed from a pool)."""
    activity.record("sandbox.created", {"name": sandbox.name}, actor=actor, sandbox_id=sandbox.id)
    _publish(sandbox)


def discard(sandbox: Sandbox) -> None:
    """Undo a failed create, or remove a pool member: engine objects first, then the row; quietly."""
    try:
        node_driver(sandbox.node).remove(sandbox.id)
    except Exception:
        logger.exception("could not remove the engine objects of failed sandbox %s", sandbox.id)
    Sandbox.objects.filter(pk=sandbox.pk).delete()
    networking.released(sandbox.id, sandbox.node)


def remove_member(member: Sandbox) -> int:
    """Remove a pool member unless a create claimed it since it was read (then it is a user's sandbox):
    the same conditional UPDATE as a claim. 1 if removed."""
    if not Sandbox.objects.filter(pk=member.pk, pool=member.pool).update(pool=POOL_REMOVING):
        return 0
    discard(member)
    return 1


def apply_state(
    sandbox: Sandbox,
    state: str,
    ips: dict[str, str],
    key: str | None,
    actor: Actor | None,
    wait_for_network: bool = False,
) -> Sandbox:
    """The state and addresses the engine reports, saved and announced (with an activity entry under
    key, if any); its network hears of them (wait_for_network: returns once it is in force)."""
    with transaction.atomic():
        sandbox.state, sandbox.ips = state, ips
        sandbox.save(update_fields=["state", "ips", "updated_at"])
        if key:
            activity.record(key, {"name": sandbox.name}, actor=actor, sandbox_id=sandbox.id)
        _publish(sandbox)
    if sandbox.network != NetworkMode.NONE:
        networking.attached(sandbox, wait=wait_for_network)
    return sandbox


def _engine_call(sandbox: Sandbox, operation: Any) -> Any:
    try:
        return operation(sandbox.id)
    except SandboxNotFound:
        apply_state(sandbox, SandboxState.MISSING, {}, "sandbox.missing", None)
        raise Conflict(_("The container of sandbox %(name)s is gone."), name=sandbox.name) from None


def in_use(project: str, creators: set[str] | None = None) -> dict[str, float]:
    """What a project's sandboxes that are not stopped take (of these creators' only, if given), as its
    quotas count it."""
    taken = Sandbox.objects.claimed().filter(project_id=project).exclude(state=SandboxState.STOPPED)
    if creators is not None:
        taken = taken.filter(creator__in=creators)
    sums = taken.aggregate(sandboxes=Count("id"), cpus=Sum("cpus"), memoryMb=Sum("memory_mb"))
    return {name: value or 0 for name, value in sums.items()}


def within_quota(project: str, limits: Limits, person: int | None) -> AbstractContextManager[None]:
    """The block makes (or starts) a sandbox of these limits in project, person's (tenancy.person_of),
    if its quotas and person's share of them hold it."""
    need = {"sandboxes": 1, "cpus": limits.cpus, "memoryMb": limits.memory_mb}
    return tenancy.within_quota(project, need, lambda creators: in_use(project, creators), person)


def start_sandbox(sandbox_id: str, *, actor: Actor) -> Sandbox:
    sandbox = get_sandbox(sandbox_id)
    limits = Limits(cpus=sandbox.cpus, memory_mb=sandbox.memory_mb, pids=sandbox.pids)
    # A stopped one counts against its project's quotas again once started.
    stopped = sandbox.state == SandboxState.STOPPED
    person = tenancy.person_of(sandbox.creator)
    with within_quota(str(sandbox.project_id), limits, person) if stopped else nullcontext():
        observed = _engine_call(sandbox, node_driver(sandbox.node).start)
        # Its address may have changed: in force before anything in it goes out again.
        return apply_state(
            sandbox, observed.state, observed.ips, "sandbox.started", actor, wait_for_network=True
        )


def stop_sandbox(sandbox_id: str, *, actor: Actor) -> Sandbox:
    sandbox = get_sandbox(sandbox_id)
    if sandbox.state == SandboxState.RUNNING:
        signals.stopping.send(Sandbox, sandbox=sandbox)
    observed = _engine_call(sandbox, node_driver(sandbox.node).stop)
    sandbox = apply_state(sandbox, observed.state, observed.ips, "sandbox.stopped", actor)
    signals.stopped.send(Sandbox, sandbox=sandbox)
    return sandbox


def rename_sandbox(sandbox_id: str, name: str, *, actor: Actor) -> Sandbox:
    """Give a sandbox another name (unique; its id stays what the API knows it by)."""
    sandbox = get_sandbox(sandbox_id)
    old = sandbox.name
    if name == old:
        return sandbox
    sandbox.name = name
    try:
        with transaction.atomic():
            sandbox.save(update_fields=["name", "updated_at"])
            activity.record("sandbox.renamed", {"old": old, "name": name}, actor=actor, sandbox_id=sandbox.id)
            _publish(sandbox)
    except IntegrityError:
        raise Conflict(_("A sandbox named %(name)s exists already."), name=name) from None
    return sandbox


def delete_sandbox(sandbox_id: str, *, actor: Actor) -> None:
    sandbox = get_sandbox(sandbox_id)
    if node_reachable(sandbox.node):
        node_driver(sandbox.node).remove(sandbox.id)
    # else its objects are orphans when the node answers again, and reconcile removes them then
    with transaction.atomic():
        # Published before the row goes (they are sent once it is gone): they are heard by its owner.
        activity.record("sandbox.deleted", {"name": sandbox.name}, actor=actor, sandbox_id=sandbox_id)
        events.publish("sandbox.deleted", {"id": sandbox_id}, sandbox_id=sandbox_id)
        sandbox.delete()
    networking.released(sandbox_id, sandbox.node)


def exec_in_sandbox(
    sandbox_id: str,
    command: list[str],
    *,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout_s: float = 60,
) -> ExecResult:
    sandbox = get_sandbox(sandbox_id).ensure_running()
    result = _engine_call(
        sandbox,
        lambda sid: node_driver(sandbox.node).exec(
            sid,
            command,
            stdin=stdin.encode() if stdin is not None else None,
            env=env,
            workdir=cwd or "/workspace",
            timeout=timeout_s,
        ),
    )
    if result.timed_out:
        raise Timeout(details=serialize_exec_result(result))
    return result
