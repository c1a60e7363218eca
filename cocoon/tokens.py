"""API tokens: generation, SHA-256 storage, timing-safe authentication, scopes."""

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import activity, events, tenancy, tokencache
from cocoon.actors import ENV_ACTOR, SYSTEM_ACTOR, Actor, Ceilings
from cocoon.choices import TokenScope
from cocoon.errors import Conflict, TokenExpired, TokenRevoked
from cocoon.lookup import get_or_not_found
from cocoon.models import ApiToken, RevokedToken
from cocoon.schema import timestamp

TOKEN_PREFIX = "cct_"
RECHECK_TYPE = "auth.recheck"  # -> consumer method auth_recheck
# last_used_at is informational; writing it on every request would serialize all requests on SQLite.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_token(plain: str) -> str:
    return hashlib.sha256(plain.encode()).hexdigest()


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def authenticate(plain: str | None) -> Actor | None:
    """The actor a plain token belongs to, or None if it is no token of ours. Compares digests in
    constant time. A token found in the database is remembered (tokencache) for the next requests: no
    query per request. Raises token_revoked or token_expired for a token that once was valid."""
    if not plain:
        return None
    digest = hash_token(plain)
    if settings.COCOON_TOKEN and hmac.compare_digest(digest, hash_token(settings.COCOON_TOKEN)):
        return ENV_ACTOR
    if (actor := tokencache.get(digest)) is not None:
        return actor
    generation = tokencache.generation()
    token = ApiToken.objects.select_related("user").filter(token_hash=digest).first()
    if token is None or not hmac.compare_digest(token.token_hash, digest):
        if (revoked := RevokedToken.objects.filter(token_hash=digest).first()) is not None:
            revoked_at = timestamp(revoked.revoked_at)
            raise TokenRevoked(details={"tokenId": revoked.token_id, "revokedAt": revoked_at})
        return None
    if token.expired():
        raise TokenExpired(details={"tokenId": token.id, "expiredAt": timestamp(token.expires_at)})
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    actor = token_actor(token)
    if actor is None:  # a person's token whose person is gone or deactivated
        return None
    tokencache.put(digest, actor, generation, expires_at=token.expires_at)
    return actor


def token_actor(token: ApiToken) -> Actor | None:
    """Who a token acts as: its scope, and for an agent token its project and whether only on its own; a
    person's token acts as that person does now (in its project), None once they are deactivated."""
    if token.scope == TokenScope.USER:
        user = token.user
        if user is None or not user.is_active:
            return None
        return tenancy.person(user, token_id=token.id, name=token.name, project=token.project_id)
    return Actor(
        token_id=token.id,
        name=token.name,
        scope=token.scope,
        project=token.project_id,
        own_only=token.own_sandboxes,
        ceilings=Ceilings.of(token.ceilings),
    )


def is_live(actor: Actor) -> bool:
    """Whether a token's actor still holds (not revoked); COCOON_TOKEN holds for the process's life."""
    return actor == ENV_ACTOR or ApiToken.objects.live().filter(pk=actor.token_id).exists()


def auth_group(token_id: str) -> str:
    """The channel-layer group of every live connection opened as this token (or Django user)."""
    return "auth." + token_id.replace(":", "-")  # group names allow no ":" (users are "user:<pk>")


def token_changed(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    """A token row was saved or deleted: the token caches forget it."""
    forget_once_committed(instance.id)  # now: a delete sets it to None afterwards


def forget_once_committed(token_id: str) -> None:
    """The token caches forget a token (its row changed, or its person's rights) once that is committed,
    not before: a process asking the database meanwhile would remember it again."""
    transaction.on_commit(lambda: tokencache.forget(token_id))


def recheck_connections(token_id: str) -> None:
    """Once committed, every live connection (WebSocket, terminal, MCP call) opened as this actor checks its
    credentials again and ends if they no longer hold: token revoked, logged out, password changed."""
    group = auth_group(token_id)
    transaction.on_commit(lambda: events.send_to_group(group, {"type": RECHECK_TYPE}))


def list_tokens() -> list[ApiToken]:
    return list(ApiToken.objects.all())


def create_token(
    name: str,
    scope: str,
    *,
    actor: Actor | None = None,
    bootstrap: bool = False,
    expires_in: timedelta | None = None,
    project: str | None = None,
    own_sandboxes: bool = False,
    user: Any = None,
    ceilings: dict[str, Any] | None = None,
) -> tuple[ApiToken, str]:
    """Create a token (valid for expires_in, or until revoked); returns the row and the plain token,
    which is never stored. An agent token acts in project (the default one unless given), and if
    own_sandboxes only on the sandboxes it creates itself, and asks for no more than ceilings; an admin
    token in every project (tokens.create's schema gives it none of these)."""
    if scope == TokenScope.AGENT:
        project = tenancy.project_named(project) if project else tenancy.default_project()
    plain = generate_token()
    expires_at = timezone.now() + expires_in if expires_in else None
    with transaction.atomic():
        token = ApiToken.objects.create(
            name=name,
            scope=scope,
            token_hash=hash_token(plain),
            bootstrap=bootstrap,
            expires_at=expires_at,
            project_id=project,
            own_sandboxes=own_sandboxes,
            user=user,
            ceilings=ceilings or {},
        )
        activity.record("token.created", {"name": name, "scope": scope}, actor=actor)
    return token, plain


def steering_parent(actor: Actor) -> str | None:
    """The token whose revocation ends the tokens of the steering agents actor spawns: actor's own, if it
    is a token of the table (not COCOON_TOKEN, not a session)."""
    return actor.token_id if ApiToken.objects.filter(pk=actor.token_id).exists() else None


def create_steering_token(
    agent_id: str, project: str, ceilings: Ceilings, parent: str | None
) -> tuple[ApiToken, str] | None:
    """The token a steering agent gets at each start (agent.spawn {steering}): in its sandbox's project,
    on the sandboxes it creates itself only, within ceilings; revoked when the agent ends (end_steering)
    or when parent (steering_parent) is. None once parent is gone: the agent's line has ended. No activity
    entry: the agent's spawn is the one."""
    with transaction.atomic():
        if parent is not None and not ApiToken.objects.select_for_update().filter(pk=parent).exists():
            return None
        plain = generate_token()
        token = ApiToken.objects.create(
            name=f"steering {agent_id}",
            scope=TokenScope.AGENT,
            token_hash=hash_token(plain),
            project_id=project,
            own_sandboxes=True,
            ceilings=ceilings.document(),
            agent=agent_id,
            parent_id=parent,
        )
    return token, plain


def end_steering(agent_id: str) -> None:
    """An agent ended: its steering tokens are revoked, and every token below them."""
    with transaction.atomic():
        for token in ApiToken.objects.filter(agent=agent_id):
            _revoke(token, SYSTEM_ACTOR)


def project_tokens(project: str) -> list[ApiToken]:
    """A project's own tokens: its agent tokens (a person's own are theirs, not the project's)."""
    return list(ApiToken.objects.filter(scope=TokenScope.AGENT, project_id=project))


def revoke_token(token_id: str, *, actor: Actor, own: bool = False, project: str | None = None) -> None:
    """Revoke a token (if own, one of actor's person's own only; with project, one of that project's own
    only: another is not found), and every steering token made below it."""
    with transaction.atomic():
        tokens = ApiToken.objects.all()
        if own:
            tokens = tokens.filter(user_id=actor.user) if actor.user is not None else tokens.none()
        if project is not None:
            tokens = tokens.filter(scope=TokenScope.AGENT, project_id=project)
        token = get_or_not_found(tokens, token_id, _("Token %(id)s does not exist."), id=token_id)
        other_admins = ApiToken.objects.live().filter(scope=TokenScope.ADMIN).exclude(pk=token.pk)
        if token.scope == TokenScope.ADMIN and not settings.COCOON_TOKEN and not other_admins.exists():
            raise Conflict(_("The last admin token cannot be revoked: create another admin token first."))
        _revoke(token, actor)


def _revoke(token: ApiToken, actor: Actor) -> None:
    for child in token.children.all():  # before the row goes: its delete would take them silently
        _revoke(child, actor)
    token_id = token.id  # the delete sets it to None
    RevokedToken.objects.update_or_create(
        token_hash=token.token_hash, defaults={"token_id": token_id, "name": token.name}
    )
    token.delete()
    # Before the activity entry: its connections must be gone before their own revocation is published.
    recheck_connections(token_id)
    activity.record("token.revoked", {"name": token.name}, actor=actor)
    if token.bootstrap:
        transaction.on_commit(lambda: settings.ADMIN_TOKEN_FILE.unlink(missing_ok=True))
