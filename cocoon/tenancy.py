"""Tenancy: the one rule that decides which objects an actor may see (SPEC: tenancy, #30).

Every sandbox belongs to a project and remembers the token that created it; what hangs off a sandbox
(its agents, files, terminals, events) belongs to the same owner. An actor bound to a project sees that
project's objects only, and a token narrowed to its own sandboxes only those it created. Admins (and the
server's own work) are bound to no project and see everything. Someone else's object answers not_found,
exactly as a missing one does, so ids leak nothing.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from django.contrib.auth import get_user_model
from django.db import models
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from cocoon import locks
from cocoon.actors import Actor, Ceilings
from cocoon.choices import Role, TokenScope
from cocoon.errors import CeilingExceeded, Conflict, Forbidden, NotFound, QuotaExceeded
from cocoon.lookup import get_or_not_found
from cocoon.models import ApiToken, Membership, Project

DEFAULT_PROJECT = "default"  # where a single user's objects live: nobody has to set a project up
PROJECT_NOT_FOUND = _("Project %(id)s does not exist.")
NO_PROJECT = ""  # the project of a person who is in none: no object has it, so they see nothing


@dataclass(frozen=True)
class Owner:
    project: str
    # The token id (or "user:<pk>") that created it, "" for the server's own work; None: the project's as a
    # whole (an activity entry of no sandbox), seen by its narrowed tokens too.
    creator: str | None


def default_project() -> str:
    """The default project's id; made when missing (the migration makes it, a flushed database has none)."""
    # A single user's secrets are the server's: its project uses them.
    Project.objects.get_or_create(id=DEFAULT_PROJECT, defaults={"name": "Default", "server_secrets": True})
    return DEFAULT_PROJECT


class Owned(models.Model):
    """What every owned object carries: its project, and the token that created it."""

    # A function: made when missing, so a row made without an owner (a test's, the server's) always has one.
    project = models.ForeignKey(Project, default=default_project, on_delete=models.PROTECT, related_name="+")
    creator = models.CharField(max_length=140, blank=True)  # a token id, "user:<pk>"; "" for the server's

    class Meta:
        abstract = True

    @property
    def owner(self) -> Owner:
        return Owner(str(self.project_id), self.creator)  # (never null: the stubs cannot tell)


def may_see(actor: Actor, owner: Owner) -> bool:
    """The rule, for one object already loaded (an event's owner, a consumer's sandbox)."""
    if actor.project is not None and owner.project != actor.project:
        return False
    return not actor.own_only or owner.creator is None or owner.creator == actor.token_id


def visible(actor: Actor, via: str = "") -> Q:
    """The rule as a queryset filter on an Owned model, or through a relation to one (via="sandbox__")."""
    where = Q()
    if actor.project is not None:
        where &= Q(**{f"{via}project_id": actor.project})
    if actor.own_only:
        where &= Q(**{f"{via}creator": actor.token_id})
    return where


def creation(actor: Actor | None, project: str | None = None) -> dict[str, str]:
    """The owner fields of an object actor creates now: in its own project, or if it is bound to none
    (an admin, the server) in the project it names, else the default one."""
    bound = actor.project if actor is not None else None
    chosen = bound if bound is not None else project or default_project()
    return {"project_id": chosen, "creator": actor.token_id if actor is not None else ""}


def project_named(project: str, actor: Actor | None = None) -> str:
    """A project's id, if it exists and actor (if given) may see it; else not_found."""
    projects = Project.objects.all()
    if actor is not None and actor.project is not None:
        projects = projects.filter(pk=actor.project)
    return get_or_not_found(projects, project, PROJECT_NOT_FOUND, id=project).pk


def same_owner(owned: Owned) -> dict[str, str]:
    """The owner fields of an object made for owned (a schedule's run): owned's owner's."""
    return {"project_id": str(owned.project_id), "creator": owned.creator}


def acting_for(actor: Actor, owned: Owned) -> Actor:
    """The server (actor) doing work owned asked for (a task's runner): what it makes is owned's owner's."""
    return replace(actor, token_id=owned.creator or actor.token_id, project=str(owned.project_id))


# A project's quotas (cocoon.schemas.QUOTAS) count its sandboxes that are not stopped, agents not exited;
# a person's share in it (Membership.quotas) those of the sandboxes they created.
QUOTA_EXCEEDED = _("Project %(project)s may use %(limit)s of %(quota)s, and %(used)s of it is in use.")
SHARE_EXCEEDED = _(
    "%(user)s may use %(limit)s of %(quota)s in project %(project)s, and %(used)s of it is in use."
)
InUse = Callable[[set[str] | None], dict[str, float]]  # what is in use, of these creators' only if given


@contextmanager
def within_quota(
    project: str, need: dict[str, float], in_use: InUse, person: int | None = None
) -> Iterator[None]:
    """Run the block that makes what need counts (a sandbox: 1 of sandboxes, its CPUs and memory) if it
    fits the project's quotas and person's share of them (a Django user's key: whose it is) beside what
    is in use, else quota_exceeded naming the quota, its limit and its use, before anything is made.
    With a quota that counts it, the block holds the project's lock, so two makes at once cannot both
    take the last of it; without one it costs nothing."""
    quotas = Project.objects.filter(pk=project).values_list("quotas", flat=True).first() or {}
    limits = {name: limit for name, limit in quotas.items() if name in need}
    share = None
    if person is not None:
        share = Membership.objects.filter(project_id=project, user_id=person).select_related("user").first()
    shares = {name: limit for name, limit in (share.quotas if share else {}).items() if name in need}
    if not limits and not shares:
        yield
        return
    with locks.exclusive(f"quota-{project}"):
        _check_quota(QUOTA_EXCEEDED, limits, need, in_use(None) if limits else {}, project=project)
        if share is not None and shares:
            used = in_use(creators_of(share.user))
            _check_quota(SHARE_EXCEEDED, shares, need, used, project=project, user=share.user.get_username())
        yield


def _check_quota(
    message: Any, limits: dict[str, float], need: dict[str, float], used: dict[str, float], **where: str
) -> None:
    for name, limit in limits.items():
        if used.get(name, 0) + need[name] > limit:
            details = {**where, "quota": name, "limit": limit, "used": used.get(name, 0)}
            raise QuotaExceeded(message, details=details, **details)


def creators_of(user: Any) -> set[str]:
    """What the owned objects a person made name as their creator: their session's id and their tokens'."""
    return {f"user:{user.pk}", *ApiToken.objects.filter(user=user).values_list("pk", flat=True)}


def person_of(creator: str) -> int | None:
    """The person (a Django user's key) who made an object, from its creator; None for a token of nobody's
    or the server."""
    if creator.startswith("user:") and creator[5:].isdigit():
        return int(creator[5:])
    return ApiToken.objects.filter(pk=creator).values_list("user_id", flat=True).first() if creator else None


CEILING_EXCEEDED = _("This token may ask for %(ceiling)s only up to %(limit)s, not %(asked)s.")


def within_ceilings(
    actor: Actor,
    *,
    network: str | None = None,
    cpus: float | None = None,
    memory_mb: int | None = None,
    providers: list[str] | None = None,
) -> None:
    """ceiling_exceeded, naming the ceiling, its limit and what was asked, unless what actor asks for is
    within its token's ceilings."""
    _check_ceilings(actor.ceilings, network=network, cpus=cpus, memory_mb=memory_mb, providers=providers)


def _check_ceilings(
    ceilings: Ceilings,
    *,
    network: str | None = None,
    cpus: float | None = None,
    memory_mb: int | None = None,
    providers: list[str] | None = None,
) -> None:
    refused: tuple[str, Any, Any] | None = None
    if network is not None and ceilings.networks is not None and network not in ceilings.networks:
        refused = ("networks", ", ".join(ceilings.networks) or "-", network)
    elif cpus is not None and ceilings.cpus is not None and cpus > ceilings.cpus:
        refused = ("cpus", ceilings.cpus, cpus)
    elif memory_mb is not None and ceilings.memory_mb is not None and memory_mb > ceilings.memory_mb:
        refused = ("memoryMb", ceilings.memory_mb, memory_mb)
    elif providers and ceilings.providers is not None and set(providers) - set(ceilings.providers):
        refused = ("providers", ", ".join(ceilings.providers) or "-", ", ".join(sorted(providers)))
    if refused is not None:
        details = dict(zip(("ceiling", "limit", "asked"), refused, strict=True))
        raise CeilingExceeded(CEILING_EXCEEDED, details=details, **details)


def narrowed(bounds: Ceilings, asked: dict[str, Any]) -> Ceilings:
    """The ceilings of a token made within bounds (a steering agent's, within its parent's): what asked
    (cocoon.schemas.CEILINGS) names, where it is within bounds (else ceiling_exceeded), bounds elsewhere."""
    wanted = Ceilings.of(asked)
    for network in wanted.networks or ():
        _check_ceilings(bounds, network=network)
    _check_ceilings(
        bounds, cpus=wanted.cpus, memory_mb=wanted.memory_mb, providers=list(wanted.providers or ())
    )
    return Ceilings(
        networks=wanted.networks if wanted.networks is not None else bounds.networks,
        providers=wanted.providers if wanted.providers is not None else bounds.providers,
        cpus=wanted.cpus if wanted.cpus is not None else bounds.cpus,
        memory_mb=wanted.memory_mb if wanted.memory_mb is not None else bounds.memory_mb,
        budget=wanted.budget,  # carved out of the maker's: carving() checks it
    )


BUDGET_LEFT = _("This token has %(limit)s of its budget left, not %(asked)s.")


@contextmanager
def carving(actor: Actor, asked: dict[str, Any] | None) -> Iterator[dict[str, Any] | None]:
    """The budget of what actor makes in the block (a sandbox, a task, a steering agent's token): as asked,
    and if actor's token has a budget ceiling, carved out of what is left of it — what asked leaves out
    of a kind, all that is left of it; past what is left, ceiling_exceeded. What is carved out is never
    given back (what was made may have spent it), except when the block fails: then nothing was made."""
    if actor.ceilings.budget is None:
        yield asked
        return
    ceiling, lock = dict(actor.ceilings.budget), f"carve-{actor.token_id}"
    with locks.exclusive(lock):
        token = ApiToken.objects.get(pk=actor.token_id)
        left = {kind: round(limit - token.carved.get(kind, 0), 6) for kind, limit in ceiling.items()}
        given = {kind: (asked or {}).get(kind, left[kind]) for kind in ceiling}
        for kind in ceiling:
            if left[kind] <= 0 or given[kind] > left[kind]:
                details = {"ceiling": f"budget.{kind}", "limit": left[kind], "asked": given[kind]}
                raise CeilingExceeded(BUDGET_LEFT, details=details, **details)
        _carve(token, given)
    try:
        yield (asked or {}) | given
    except BaseException:
        with locks.exclusive(lock):  # as it is now: others may have carved meanwhile
            _carve(ApiToken.objects.get(pk=actor.token_id), {kind: -amount for kind, amount in given.items()})
        raise


def _carve(token: ApiToken, amounts: dict[str, float]) -> None:
    token.carved = {kind: round(token.carved.get(kind, 0) + amounts.get(kind, 0), 6) for kind in amounts}
    token.save(update_fields=["carved"])


def check_not_repeating(actor: Actor) -> None:
    """A schedule's runs would each spend: a token with a budget ceiling makes none."""
    if actor.ceilings.budget is not None:
        details = {"ceiling": "budget", "limit": dict(actor.ceilings.budget), "asked": "schedule"}
        raise CeilingExceeded(
            _("A token with a budget ceiling makes no schedules: their runs would spend past it."),
            details=details,
        )


def update_project(
    project: str,
    *,
    name: str | None = None,
    quotas: dict[str, float] | None = None,
    server_secrets: bool | None = None,
) -> Project:
    """Rename a project, set its quotas or whether it may use the server's secrets (None: as they were);
    not_found for a missing one."""
    row = get_or_not_found(Project.objects.select_for_update(), project, PROJECT_NOT_FOUND, id=project)
    row.name = name if name is not None else row.name
    row.quotas = quotas if quotas is not None else row.quotas
    row.server_secrets = server_secrets if server_secrets is not None else row.server_secrets
    row.save(update_fields=["name", "quotas", "server_secrets"])
    return row


def person(user: Any, *, token_id: str, name: str, project: str | None = None) -> Actor:
    """Who a person (a Django user) is now, in a session or through a token of theirs: a superuser an
    admin; anyone else in project if they are a member of it, else in their first one, with their role
    there; one in no project sees nothing."""
    if user.is_superuser:
        return Actor(token_id=token_id, name=name, scope=TokenScope.ADMIN, user=user.pk)
    memberships = list(Membership.objects.filter(user=user).values_list("project_id", "role"))
    chosen = next((each for each in memberships if each[0] == project), None) or next(iter(memberships), None)
    where, role = chosen or (NO_PROJECT, Role.VIEWER)
    return Actor(token_id=token_id, name=name, scope=TokenScope.AGENT, project=where, role=role, user=user.pk)


def check_manages(actor: Actor, project: str) -> None:
    """Who may change a project's members, secrets and tokens: a server admin, or an owner of it
    (not_found for a project actor may not see; forbidden for one of its own it does not own)."""
    project_named(project, actor)
    if not actor.is_admin and actor.role != Role.OWNER:
        raise Forbidden(
            _("Only an owner of project %(id)s or an admin changes its members, secrets and tokens."),
            id=project,
        )


def members(project: str) -> list[Membership]:
    return list(
        Membership.objects.filter(project_id=project).select_related("user").order_by("user__username")
    )


def set_member(project: str, username: str, role: str, quotas: dict[str, float] | None = None) -> Membership:
    """Make a person a member of project in role (or give them that role), with their share of its quotas
    (None: as it was); not_found for no such person."""
    defaults: dict[str, Any] = {"role": role} | ({"quotas": quotas} if quotas is not None else {})
    membership, _created = Membership.objects.update_or_create(
        project_id=project, user=_user_named(username), defaults=defaults
    )
    return membership


def remove_member(project: str, username: str) -> None:
    """Take a person out of project; not_found unless they are in it."""
    removed, _count = Membership.objects.filter(project_id=project, user__username=username).delete()
    if not removed:
        raise NotFound(_("%(name)s is no member of project %(project)s."), name=username, project=project)


def _user_named(username: str) -> Any:
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise NotFound(_("There is no active user %(name)s."), name=username)
    return user


def projects_of(actor: Actor) -> list[Project]:
    """The projects actor may see: every one for an actor bound to none, a person's those they are a
    member of (their session works in one of them at a time), a token's its own."""
    projects = Project.objects.all()
    if actor.project is None:
        return list(projects)
    if actor.user is not None:
        return list(projects.filter(memberships__user_id=actor.user))
    return list(projects.filter(pk=actor.project))


def create_project(
    project: str, name: str, quotas: dict[str, float] | None = None, server_secrets: bool = False
) -> Project:
    """A new project (using the server's secrets only if server_secrets); conflict when the id is taken."""
    defaults = {"name": name, "quotas": quotas or {}, "server_secrets": server_secrets}
    made, created = Project.objects.get_or_create(id=project, defaults=defaults)
    if not created:
        raise Conflict(_("A project %(id)s exists already."), id=project)
    return made


@dataclass(frozen=True)
class Sandboxes:
    """What the sandboxes app (a layer above) tells this one: rows of other apps name a sandbox by id."""

    owner: Callable[[str], Owner | None]  # None once it is gone
    visible_ids: Callable[[Actor], QuerySet[Any]]  # the ids of the sandboxes actor may see (a subquery)


_sandboxes: list[Sandboxes] = []


def set_sandboxes(sandboxes: Sandboxes) -> None:
    _sandboxes[:] = [sandboxes]


def sandbox_owner(sandbox_id: str) -> Owner | None:
    """The owner of a sandbox (None once it is gone, or before the sandboxes app is ready)."""
    return _sandboxes[0].owner(sandbox_id) if _sandboxes else None


def by_project(actor: Actor, *, server_wide: bool = False) -> Q:
    """The rule for rows that carry their project (usage records, activity entries): a project's, those
    of its sandboxes gone since too; with server_wide also the rows of no project. A token narrowed to
    its own sandboxes sees only their rows (and, server_wide, those of no sandbox)."""
    if actor.sees_everything:
        return Q()
    where = Q(project__in=[actor.project, ""] if server_wide else [actor.project]) if actor.project else Q()
    return where & by_sandbox(actor) if actor.own_only else where


def by_sandbox(actor: Actor, field: str = "sandbox_id") -> Q:
    """The rule for rows that name a sandbox by id (activity entries): those of sandboxes actor may see,
    and those of no sandbox (server-wide). A gone sandbox's rows are seen by actors bound to none only."""
    if actor.sees_everything:
        return Q()
    if not _sandboxes:  # (the sandboxes app not ready: nothing of a sandbox, rather than all of them)
        return Q(**{field: ""})
    return Q(**{field: ""}) | Q(**{f"{field}__in": _sandboxes[0].visible_ids(actor)})
