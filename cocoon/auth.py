"""Authentication for HTTP (DRF), WebSockets (ASGI middleware) and browser sessions.

A token comes as "Authorization: Bearer <token>" or as ?token= (browser WebSockets and downloads,
which cannot set headers). The query form is stripped from access logs (see cocoon.logs).

A browser logs in once with a token (or a Django user) and then carries a Django session: the session
holds which token (or user) it stands for, never the plain token, and is checked again on every
request, so revoking the token ends the session too. Live connections (WebSockets, MCP calls) check
again on every call and when told to (tokens.recheck_connections: revocation, logout, password change).
"""

import hashlib
import hmac
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, get_user_model
from django.contrib.auth import logout as django_logout
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest
from django.utils.module_loading import import_string
from rest_framework import authentication, exceptions

from cocoon import tenancy, tokens
from cocoon.actors import ENV_ACTOR, Actor
from cocoon.errors import CocoonError
from cocoon.middleware import client_address, decode_scope, scope_language, send_error
from cocoon.models import ApiToken, Membership
from cocoon.throttle import guarded

SESSION_ACTOR_KEY = "cocoon.actor"
SESSION_PROJECT_KEY = "cocoon.project"  # the project a person's session works in (the UI's switcher)


def token_from(authorization: str | None, query_token: str | None) -> str | None:
    if authorization:
        scheme, _sep, credentials = authorization.partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            return credentials.strip()
    return query_token or None


def token_actor(plain: str, address: str) -> Actor | None:
    """The actor of a presented token, or None: a wrong token counts against the client's address, whose
    wrong tokens get rate_limited past the limit; a valid one always passes. A revoked or expired token
    raises token_revoked or token_expired (not counted: it is no guess)."""
    return guarded(address, lambda: tokens.authenticate(plain))


class TokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[Actor, None] | None:
        plain = token_from(request.headers.get("authorization"), request.query_params.get("token"))
        if plain is None:
            return None  # -> NotAuthenticated, answered as 401 unauthorized
        actor = token_actor(plain, request.META.get("REMOTE_ADDR", ""))
        if actor is None:
            raise exceptions.AuthenticationFailed()
        return actor, None

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="cocoon"'


# -- browser sessions ------------------------------------------------------------------------------


def _env_digest() -> str:
    return hashlib.sha256(settings.COCOON_TOKEN.encode()).hexdigest() if settings.COCOON_TOKEN else ""


def log_in_session(session: SessionBase, *, token_plain: str | None = None, user: Any = None) -> Actor | None:
    """Bind a session to the token (or Django user) it logged in with; None if the token is not valid."""
    actor: Actor | None
    if user is not None:
        actor = user_actor(user)
        marker = {"user": user.pk}
    else:
        actor = tokens.authenticate(token_plain)
        if actor is None:
            return None
        # COCOON_TOKEN has no row: remember its digest, so changing the variable ends such sessions.
        marker = {"env": _env_digest()} if actor is ENV_ACTOR else {"token": actor.token_id}
    session.cycle_key()  # a new session id at login: no session fixation
    session[SESSION_ACTOR_KEY] = marker
    return actor


def user_actor(user: Any, project: str | None = None) -> Actor:
    """A Django user acts as an admin if it is a superuser, else with agent scope in one of its projects
    with its role there: project (the one its session switched to) if it is a member, else its first.
    One in no project sees nothing."""
    return tenancy.person(user, token_id=user_token_id(user.pk), name=user.get_username(), project=project)


def session_actor(session: SessionBase) -> Actor | None:
    """Who a browser session stands for now (the token may have been revoked meanwhile), or None."""
    marker = session.get(SESSION_ACTOR_KEY) or {}
    if "token" in marker:
        token = ApiToken.objects.live().filter(pk=marker["token"]).first()
        return tokens.token_actor(token) if token else None
    if "env" in marker:
        digest = _env_digest()
        return ENV_ACTOR if digest and hmac.compare_digest(digest, marker["env"]) else None
    if "user" in marker:
        user = get_user_model().objects.filter(pk=marker["user"], is_active=True).first()
        # Django's own check: a changed password ends the user's sessions.
        if user is None or not hmac.compare_digest(
            session.get(HASH_SESSION_KEY, ""), user.get_session_auth_hash()
        ):
            return None
        return user_actor(user, session.get(SESSION_PROJECT_KEY))
    return None


ADMIN_PATH = "/admin/"


def token_admin(actor: Actor) -> Any:
    """The Django user the admin site sees for a session logged in with an admin token: a superuser
    named after the token ("token:<id>", a name no sign-up can make), without a password, so that it
    enters only through that session and only while the token lives (AdminSessionMiddleware)."""
    user, made = get_user_model().objects.get_or_create(
        username=f"token:{actor.token_id}", defaults={"is_staff": True, "is_superuser": True}
    )
    if made:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


class AdminSessionMiddleware:
    """/admin/ accepts the UI's login: a session logged in with an admin token (or the COCOON_TOKEN)
    enters as that token's stand-in user, checked again on every request (a revoked token is let in
    no more). People logged in to the UI are Django users already."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        if request.path.startswith(ADMIN_PATH) and not request.user.is_authenticated:
            actor = session_actor(request.session)
            if actor is not None and actor.is_admin and actor.user is None:
                request.user = token_admin(actor)
        return self.get_response(request)


def _same_origin(headers: dict[str, str]) -> bool:
    """A cookie rides along on any site's WebSocket to us, so it only counts from our own pages."""
    origin = headers.get("origin")
    return bool(origin) and urlsplit(origin).netloc == headers.get("host")


def _cookie_session_key(headers: dict[str, str]) -> str | None:
    morsel = SimpleCookie(headers.get("cookie", "")).get(settings.SESSION_COOKIE_NAME)
    return morsel.value if morsel is not None and _same_origin(headers) else None


def _stored_session_actor(session_key: str) -> Actor | None:
    store = import_string(f"{settings.SESSION_ENGINE}.SessionStore")
    return session_actor(store(session_key=session_key))


def log_out(request: HttpRequest) -> None:
    """End a browser session, and with it the live connections it opened (UI WebSocket, terminals)."""
    actor = session_actor(request.session)
    django_logout(request)  # flushes the whole session, the cocoon actor included
    if actor is not None:
        tokens.recheck_connections(actor.token_id)


def recheck_user_connections(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A Django user was saved or deleted (password changed, deactivated, removed): its connections check,
    and its own tokens act with what it may do now."""
    _rights_changed(instance.pk)


def recheck_member_connections(sender: Any, instance: Membership, **kwargs: Any) -> None:
    """A person was added to a project, given another role or removed from it: their connections (their
    sessions' and their tokens') check, and end (LiveCredentials: their rights changed)."""
    _rights_changed(instance.user_id)


def _rights_changed(user_pk: Any) -> None:
    tokens.recheck_connections(user_token_id(user_pk))
    for token_id in ApiToken.objects.filter(user_id=user_pk).values_list("id", flat=True):
        tokens.forget_once_committed(token_id)
        tokens.recheck_connections(token_id)


def user_token_id(pk: Any) -> str:
    return f"user:{pk}"


# -- live connections ------------------------------------------------------------------------------


def current_actor(actor: Actor, session_key: str | None) -> Actor | None:
    """Who a live connection stands for now, from its session (logged out, password changed, token revoked)
    or its token (revoked); None once the credentials it was opened with no longer hold."""
    if session_key is not None:
        return _stored_session_actor(session_key)
    return actor if tokens.is_live(actor) else None


# -- ASGI --------------------------------------------------------------------------------------------


def presented_token(headers: dict[str, str], query: dict[str, list[str]]) -> str | None:
    """The token an ASGI request (HTTP or WebSocket) presents, from its decoded headers and query."""
    return token_from(headers.get("authorization"), next(iter(query.get("token", ())), None))


def actor_of(headers: dict[str, str], query: dict[str, list[str]], address: str) -> Actor | None:
    """The token's actor of an ASGI request (HTTP or WebSocket) from its decoded headers and query, or
    None without a valid token. Raises rate_limited, token_revoked, token_expired (token_actor)."""
    plain = presented_token(headers, query)
    return token_actor(plain, address) if plain else None


async def request_actor(scope: dict) -> tuple[Actor | None, dict[str, str], dict[str, list[str]]]:
    """actor_of a scope, with its headers and query for later use."""
    headers, query = decode_scope(scope)
    actor = await database_sync_to_async(actor_of)(headers, query, client_address(scope))
    return actor, headers, query


class WebSocketTokenMiddleware:
    """Put the authenticated Actor (or None) into scope["actor"] for WebSocket consumers.

    A token wins; without one, the browser's session cookie counts (same origin only).
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        try:
            actor, headers, query = await request_actor(scope)
        except CocoonError as error:  # rate_limited, token_revoked, token_expired
            return await send_error(scope, receive, send, error, await scope_language(scope))
        session_key = None
        if actor is None and presented_token(headers, query) is None:
            session_key = _cookie_session_key(headers)
            if session_key is not None:
                actor = await database_sync_to_async(_stored_session_actor)(session_key)
        # session_key: how consumers check again later (auth.current_actor) that the session still holds.
        scope = dict(scope, actor=actor, session_key=session_key, headers_by_name=headers, query=query)
        return await self.app(scope, receive, send)


class SessionActorAuthentication(authentication.BaseAuthentication):
    """DRF authentication by the browser's session, for GET-only views (downloads): it does no CSRF
    check, so it must never guard a view that changes anything."""

    def authenticate(self, request: Any) -> tuple[Actor, None] | None:
        actor = session_actor(request._request.session)
        return (actor, None) if actor else None
