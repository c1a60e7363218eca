"""Token authentication for HTTP (DRF) and WebSockets (ASGI middleware).

A token comes as "Authorization: Bearer <token>" or as ?token= (browser WebSockets and downloads,
which cannot set headers). The query form is stripped from access logs (see cocoon.logs).
"""

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from rest_framework import authentication, exceptions

from cocoon import tokens
from cocoon.actors import Actor


def token_from(authorization: str | None, query_token: str | None) -> str | None:
    if authorization:
        scheme, _sep, credentials = authorization.partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            return credentials.strip()
    return query_token or None


class TokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[Actor, None] | None:
        plain = token_from(request.headers.get("authorization"), request.query_params.get("token"))
        if plain is None:
            return None  # -> NotAuthenticated, answered as 401 unauthorized
        actor = tokens.authenticate(plain)
        if actor is None:
            raise exceptions.AuthenticationFailed()
        return actor, None

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="cocoon"'


async def request_actor(scope: dict) -> tuple[Actor | None, dict[str, str], dict[str, list[str]]]:
    """The actor of an ASGI request (HTTP or WebSocket), with its headers and query for later use."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    plain = token_from(headers.get("authorization"), (query.get("token") or [None])[0])
    actor = await database_sync_to_async(tokens.authenticate)(plain) if plain else None
    return actor, headers, query


class WebSocketTokenMiddleware:
    """Put the authenticated Actor (or None) into scope["actor"] for WebSocket consumers."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
        }
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        plain = token_from(headers.get("authorization"), (query.get("token") or [None])[0])
        actor = await database_sync_to_async(tokens.authenticate)(plain) if plain else None
        return await self.app(dict(scope, actor=actor, headers_by_name=headers, query=query), receive, send)
