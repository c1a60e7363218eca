"""Invitations: a one-time link that makes whoever opens it a member of a project in a role.

An owner (or an admin) makes one (projects.invite) and hands the link on; the person opening it logs in
or signs up (where password login is on) and joins. The link's secret is random and only its SHA-256 is
kept; it works once, until it expires, and not after its project's owners revoke it. Joining never
lowers a role the person holds there already.
"""

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import activity, system
from cocoon.actors import Actor
from cocoon.choices import ROLE_RANK
from cocoon.errors import Forbidden
from cocoon.lookup import get_or_not_found
from cocoon.models import Invite, Membership

INVITE_PATH = "/join/"
DEFAULT_HOURS = 72


class InviteInvalid(Forbidden):
    """The link opens nothing (any more): unknown, used, expired or revoked."""


INVALID = _("This invitation is not valid: it was used already, it expired or it was revoked.")


def _digest(plain: str) -> str:
    return hashlib.sha256(plain.encode()).hexdigest()


def create_invite(project: str, role: str, *, actor: Actor, hours: int = DEFAULT_HOURS) -> tuple[Invite, str]:
    """A new invitation to project in role, valid for hours; with the link, which is never shown again."""
    plain = secrets.token_urlsafe(32)
    with transaction.atomic():
        invite = Invite.objects.create(
            project_id=project,
            role=role,
            token_hash=_digest(plain),
            created_by=actor.label,
            expires_at=timezone.now() + timedelta(hours=hours),
        )
        activity.record("project.invited", {"project": project, "role": role}, actor=actor, project=project)
    return invite, system.public_url() + INVITE_PATH + plain


def open_invites(project: str) -> list[Invite]:
    return list(
        Invite.objects.filter(project_id=project, used_at__isnull=True, expires_at__gt=timezone.now())
    )


def revoke_invite(project: str, invite_id: str) -> None:
    invites = Invite.objects.filter(project_id=project, used_at__isnull=True)
    get_or_not_found(invites, invite_id, _("Invitation %(id)s does not exist."), id=invite_id).delete()


def invite_of(plain: str) -> Invite:
    """The open invitation a link's secret stands for, else invite_invalid (forbidden)."""
    invite = Invite.objects.select_related("project").filter(token_hash=_digest(plain)).first()
    if invite is None or invite.used_at is not None or invite.expires_at <= timezone.now():
        raise InviteInvalid(INVALID)
    return invite


def accept(plain: str, user: Any) -> Membership:
    """The person joins through the link (once: a second use is invite_invalid); a higher role they hold
    in the project already stays."""
    with transaction.atomic():
        invite = invite_of(plain)
        used = Invite.objects.filter(pk=invite.pk, used_at__isnull=True).update(
            used_at=timezone.now(), used_by=user
        )
        if not used:  # another use won meanwhile
            raise InviteInvalid(INVALID)
        membership, created = Membership.objects.get_or_create(
            project_id=invite.project_id, user=user, defaults={"role": invite.role}
        )
        if not created and ROLE_RANK[invite.role] > ROLE_RANK[membership.role]:
            membership.role = invite.role
            membership.save(update_fields=["role"])
        params = {"user": user.get_username(), "project": invite.project_id, "role": membership.role}
        activity.record("project.invite_used", params, project=invite.project_id)
    return membership
