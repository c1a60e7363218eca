"""The activity log: entries are stored as a message key + params and rendered in each reader's language.

Apps add their message keys with register_messages({...}, visibility=...) next to the code that records
them. Entries are admin-only unless registered as agent-visible: agent tokens read (activity.list, the
"activity" event) only entries about what their own methods could read.
"""

from datetime import timedelta
from typing import Any

from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from cocoon import events, tenancy
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.models import ActivityEntry
from cocoon.schemas import serialize_activity_entry

MESSAGES: dict[str, Any] = {}
VISIBILITY: dict[str, str] = {}  # message key -> Visibility


def register_messages(messages: dict[str, Any], *, visibility: Visibility = Visibility.ADMIN) -> None:
    duplicate = MESSAGES.keys() & messages.keys()
    if duplicate:
        raise ValueError(f"activity keys registered twice: {sorted(duplicate)}")
    MESSAGES.update(messages)
    VISIBILITY.update(dict.fromkeys(messages, visibility))


register_messages(
    {
        "settings.updated": _("Settings changed: %(keys)s."),
        "settings.reset": _("Settings reset to defaults: %(keys)s."),
        "secret.set": _("Secret %(name)s was saved."),
        "secret.deleted": _("Secret %(name)s was deleted."),
        "token.created": _("Token %(name)s (%(scope)s) was created."),
        "token.revoked": _("Token %(name)s was revoked."),
        "project.created": _("Project %(name)s (%(id)s) was created."),
        "project.updated": _("Project %(name)s (%(id)s) was changed."),
        "project.member_set": _("%(user)s is %(role)s of project %(project)s."),
        "project.member_removed": _("%(user)s was taken out of project %(project)s."),
        "project.invited": _("An invitation to project %(project)s as %(role)s was made."),
        "project.invite_used": _("%(user)s joined project %(project)s as %(role)s through an invitation."),
        "person.signed_on": _("%(user)s signed on for the first time (single sign-on)."),
        "activity.pruned": _("%(count)s old activity entries were removed."),
        "system.first_run": _("cocoon was set up for the first time."),
    }
)


def render(key: str, params: dict[str, Any], language: str) -> str:
    template = MESSAGES.get(key)
    if template is None:
        return key
    with translation.override(language):
        try:
            return str(template) % params
        except (KeyError, TypeError, ValueError):
            return str(template)


def record(
    key: str,
    params: dict[str, Any] | None = None,
    *,
    actor: Actor | None = None,
    sandbox_id: str = "",
    agent_id: str = "",
    project: str | None = None,
) -> ActivityEntry:
    """An entry, and its event. It is its sandbox's project's, else the project it names (a project's
    secret set), else its actor's (what a project's token does is its project's), else the server's."""
    if key not in MESSAGES:
        raise ValueError(f"unregistered activity key {key}")
    owner = tenancy.sandbox_owner(sandbox_id) if sandbox_id else None
    project = owner.project if owner else project or (actor.project if actor else None) or ""
    entry = ActivityEntry.objects.create(
        key=key,
        params=params or {},
        actor=actor.label if actor else "",
        project=project,
        sandbox_id=sandbox_id,
        agent_id=agent_id,
    )
    events.publish(
        "activity",
        serialize_activity_entry(entry),
        sandbox_id=sandbox_id,
        agent_id=agent_id,
        visibility=VISIBILITY[key],
        owner=owner or (tenancy.Owner(project, None) if project else None),
    )
    return entry


def list_entries(
    actor: Actor, *, limit: int = 50, before: int | None = None, sandbox_id: str = "", agent_id: str = ""
) -> list[ActivityEntry]:
    """The newest entries the actor may see."""
    # Its project's, those of its sandboxes gone since too, and the server's.
    entries = ActivityEntry.objects.filter(tenancy.by_project(actor, server_wide=True))
    if not actor.is_admin:  # (admins also see entries of keys no longer registered)
        entries = entries.filter(key__in=[key for key, shown in VISIBILITY.items() if actor.may_see(shown)])
    if before is not None:
        entries = entries.filter(id__lt=before)
    if sandbox_id:
        entries = entries.filter(sandbox_id=sandbox_id)
    if agent_id:
        entries = entries.filter(agent_id=agent_id)
    return list(entries[:limit])


def prune(older_than_days: int) -> int:
    """Delete entries older than the given age; record how many went (if any)."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    count, _deleted = ActivityEntry.objects.filter(created_at__lt=cutoff).delete()
    if count:
        record("activity.pruned", {"count": count})
    return count
