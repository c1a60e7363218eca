"""The outermost ASGI layer: who is really calling, over which scheme, and for which host name.

Django's SECURE_PROXY_SSL_HEADER (and Daphne's --proxy-headers) believe any client that sends the
headers. Here X-Forwarded-For and X-Forwarded-Proto count only when the TCP peer is one of
COCOON_TRUSTED_PROXIES; either way they are removed, so nothing further in can read a forged one. What
they say goes into the scope's client and scheme, which Django (REMOTE_ADDR, is_secure()), Channels and
/mcp all read. Host names outside ALLOWED_HOSTS are refused for every path (Django checks only its
own views; WebSockets and /mcp bypass it): a DNS-rebinding page reaches us under its own name.
"""

import json
from ipaddress import ip_address
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils import translation
from django.utils.translation import gettext_lazy as _

from cocoon.errors import CocoonError, ErrorCode, RpcError
from cocoon.i18n import language_of_scope

FORWARDED_HEADERS = {b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"forwarded"}
UNKNOWN_HOST = _("This server does not answer to that host name.")
# A close code before the WebSocket is accepted turns into an HTTP 403 of the handshake (Daphne); after
# it, 4000 + the HTTP status says why.
WS_CLOSE_BASE = 4000


def is_trusted_proxy(address: str) -> bool:
    try:
        parsed = ip_address(address)
    except ValueError:
        return False
    parsed = getattr(parsed, "ipv4_mapped", None) or parsed
    return any(parsed in network for network in settings.COCOON_TRUSTED_PROXIES)


def forwarded_client(chain: str, peer: str) -> str:
    """The client named by X-Forwarded-For: the rightmost entry that is not one of our proxies.

    Entries left of it were written by the client itself and prove nothing.
    """
    client = peer
    for entry in reversed(chain.split(",")):
        try:
            client = str(ip_address(entry.strip()))
        except ValueError:
            break
        if not is_trusted_proxy(client):
            break
    return client


def resolve_forwarding(scope: dict[str, Any]) -> dict[str, Any]:
    """scope with the client and scheme the trusted proxy reports, and no forwarding headers left."""
    forwarded: dict[bytes, list[str]] = {}
    headers = []
    for name, value in scope.get("headers", []):
        if name.lower() in FORWARDED_HEADERS:
            forwarded.setdefault(name.lower(), []).append(value.decode("latin-1"))
        else:
            headers.append((name, value))
    resolved = dict(scope, headers=headers)
    peer = scope.get("client")
    if not peer or not is_trusted_proxy(peer[0]):
        return resolved
    if chain := forwarded.get(b"x-forwarded-for"):
        resolved["client"] = (forwarded_client(",".join(chain), peer[0]), 0)
    proto = (forwarded.get(b"x-forwarded-proto") or [""])[0].split(",")[0].strip().lower()
    if proto in ("http", "https"):
        secure = proto == "https"
        if scope["type"] == "websocket":
            resolved["scheme"] = "wss" if secure else "ws"
        else:
            resolved["scheme"] = proto
    return resolved


def host_allowed(scope: dict[str, Any]) -> bool:
    host = next((value for name, value in scope["headers"] if name.lower() == b"host"), None)
    if host is None:
        # Browsers always send Host, and only a browser can be led here by DNS rebinding; what lacks it
        # is a test harness or a raw client, which Django's own check still sees by server name.
        return True
    domain, _port = split_domain_port(host.decode("latin-1"))
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


def client_address(scope: dict[str, Any]) -> str:
    return scope["client"][0] if scope.get("client") else ""


async def send_error(
    scope: dict[str, Any], receive: Any, send: Any, error: CocoonError, language: str
) -> None:
    """Answer an ASGI request with an error: JSON over HTTP, a frame and a close over a WebSocket."""
    with translation.override(language):
        body = {"error": error.render()}
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": json.dumps({"id": None, **body})})
        await send({"type": "websocket.close", "code": WS_CLOSE_BASE + error.http_status})
        return
    headers = [(b"content-type", b"application/json")] + [
        (name.lower().encode(), value.encode()) for name, value in error.http_headers.items()
    ]
    await send({"type": "http.response.start", "status": error.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def decode_scope(scope: dict[str, Any]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """An ASGI scope's headers (by lower-case name) and query, as text."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
    return headers, parse_qs(scope.get("query_string", b"").decode("latin-1"))


async def scope_language(scope: dict[str, Any]) -> str:
    language: str = await database_sync_to_async(language_of_scope)(*decode_scope(scope))
    return language


class ForwardedMiddleware:
    """Resolve the trusted proxy's forwarding headers, then refuse host names that are not ours."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        scope = resolve_forwarding(scope)
        if not host_allowed(scope):
            if scope["type"] == "websocket":
                await receive()
                await send({"type": "websocket.close", "code": WS_CLOSE_BASE + 400})
                return None
            error = RpcError(ErrorCode.INVALID_REQUEST, UNKNOWN_HOST)
            return await send_error(scope, receive, send, error, await scope_language(scope))
        return await self.app(scope, receive, send)
