"""Who a single sign-on is: the person a provider's ID token names, and their projects and roles from its
groups claim (COCOON_OIDC_GROUPS). The protocol (discovery, code flow with PKCE, the token's signature,
issuer, audience and nonce) is Authlib's, in ui/sso.py; the claims reach this module checked.

A provider's subject is linked to a person once, by the provider's stable id; a name the provider lets its
users choose never takes over a person made here some other way.
"""

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import activity
from cocoon.choices import ROLE_RANK
from cocoon.errors import Conflict, Forbidden, Unauthorized
from cocoon.models import Membership, Project, SsoIdentity

# Higher wins where two of a person's groups grant one project.
MAX_GROUPS = 1000  # a claim is the provider's word, but still bounded


def enabled() -> bool:
    return bool(settings.COCOON_OIDC_ISSUER)


def sign_on(claims: dict[str, Any]) -> Any:
    """The person claims (an ID token's, checked) stand for, made at their first sign-on, with the
    projects and roles their groups grant now. Raises unauthorized for claims without a subject,
    forbidden for a deactivated person, conflict where the name is a person's made otherwise."""
    subject, groups = claims.get("sub"), _groups(claims.get(settings.COCOON_OIDC_GROUPS_CLAIM))
    if not isinstance(subject, str) or not 0 < len(subject) <= 255:
        raise Unauthorized(_("The sign-on provider named nobody (the ID token has no subject)."))
    with transaction.atomic():
        identity = (
            SsoIdentity.objects.select_related("user")
            .filter(issuer=settings.COCOON_OIDC_ISSUER, subject=subject)
            .first()
        )
        user = identity.user if identity else _first_sign_on(subject, claims)
        if not user.is_active:
            raise Forbidden(_("%(name)s is deactivated on this server."), name=user.get_username())
        _grant(user, groups)
    return user


def _first_sign_on(subject: str, claims: dict[str, Any]) -> Any:
    name = claims.get("preferred_username")
    username = name if isinstance(name, str) and 0 < len(name) <= 150 else subject[:150]
    people = get_user_model()
    if people.objects.filter(username=username).exists():
        raise Conflict(
            _("A person named %(name)s exists on this server already, not made by single sign-on."),
            name=username,
        )
    email = claims.get("email")
    user = people.objects.create_user(username=username, email=email if isinstance(email, str) else "")
    user.set_unusable_password()  # they sign on; no password of theirs is here
    user.save(update_fields=["password"])
    SsoIdentity.objects.create(issuer=settings.COCOON_OIDC_ISSUER, subject=subject, user=user)
    activity.record("person.signed_on", {"user": username})
    return user


def _groups(claim: Any) -> set[str]:
    if not isinstance(claim, list):
        return set()
    return {group for group in claim[:MAX_GROUPS] if isinstance(group, str)}


def _grant(user: Any, groups: set[str]) -> None:
    """Make user's admin flag and roles in the mapped projects what groups grant; changes only what
    differs, since every change ends the person's open sessions (cocoon.auth.recheck_*)."""
    grants = settings.COCOON_OIDC_GROUPS
    if any(role == "admin" for _group, _project, role in grants):
        admin = any(role == "admin" and group in groups for group, _project, role in grants)
        if user.is_superuser != admin or user.is_staff != admin:
            user.is_superuser = user.is_staff = admin
            user.save(update_fields=["is_superuser", "is_staff"])
    roles: dict[str, str | None] = {project: None for _group, project, role in grants if role != "admin"}
    for group, project, role in grants:
        held_here = roles.get(project)
        higher = held_here is None or ROLE_RANK[role] > ROLE_RANK[held_here]
        if role != "admin" and group in groups and higher:
            roles[project] = role
    held = dict(Membership.objects.filter(user=user, project_id__in=roles).values_list("project_id", "role"))
    for project, granted in roles.items():
        if granted is None and project in held:
            Membership.objects.filter(user=user, project_id=project).delete()
        elif granted is not None and held.get(project) != granted:
            Project.objects.get_or_create(pk=project, defaults={"name": project})
            Membership.objects.update_or_create(project_id=project, user=user, defaults={"role": granted})
