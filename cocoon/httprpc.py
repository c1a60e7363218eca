"""POST /v1/rpc/<method>: body = params  ->  {"result": ...} | {"error": {...}} with the error's status.

A plain ASGI app, as /mcp is: the body is read in the event loop, and the token, the params, the method
and the error's language are all handled in one trip to a pool thread. Served by Django, a call took a
thread started and joined for the request alone, a trip to it for each middleware (sessions, CSRF,
messages: nothing an RPC with a token uses) and DRF's negotiation around the same registry call; that
was two thirds of system.info's time (bench/rpc.py, docs/architecture.md).
"""

import functools
import json
import logging
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestAborted
from django.utils import translation
from django.utils.translation import gettext_lazy as _

from cocoon import calls
from cocoon.auth import actor_of, presented_token
from cocoon.errors import CocoonError, ErrorCode, RpcError, unexpected_error
from cocoon.i18n import language_of_scope
from cocoon.middleware import client_address, decode_scope
from cocoon.registry import PARAMS_NOT_OBJECT, registry

logger = logging.getLogger(__name__)

PATH = re.compile(r"/v1/rpc/([^/]+)")
TOO_LARGE = _("The request body is too large.")
HEADERS = [(b"content-type", b"application/json"), (b"x-content-type-options", b"nosniff")]


def method_of(path: str) -> str | None:
    """The method an RPC URL names, or None if the path is not one (Django answers it: a 404)."""
    match = PATH.fullmatch(path)
    return match[1] if match else None


async def application(method: str, scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answer a request for the method its URL named (method_of)."""
    try:
        body = await _read_body(receive, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    except RequestAborted:
        return  # the client went away: nobody to answer
    headers, query = decode_scope(scope)
    caller = presented_token(headers, query) or client_address(scope)
    status, payload, extra = await calls.in_thread(caller, answer, method, scope, headers, query, body)
    content = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    more = [(name.lower().encode(), value.encode()) for name, value in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": HEADERS + more})
    await send({"type": "http.response.body", "body": content})


def answer(
    method: str,
    scope: dict[str, Any],
    headers: dict[str, str],
    query: dict[str, list[str]],
    body: bytes | None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The status, JSON body and extra headers for an RPC request (body None: it was too large)."""
    language = functools.cache(lambda: language_of_scope(headers, query))  # a query, and only if asked
    try:
        actor = actor_of(headers, query, client_address(scope))
        if actor is None:
            raise RpcError(ErrorCode.UNAUTHORIZED)
        if scope["method"] != "POST":
            raise RpcError(ErrorCode.METHOD_NOT_ALLOWED)
        if body is None:
            raise RpcError(ErrorCode.INVALID_REQUEST, TOO_LARGE)
        result = registry.dispatch(method, parse_params(body), actor, language)
    except CocoonError as error:
        return _error(error, language())
    except Exception as error:
        logger.exception("unhandled error in %s", scope["path"])
        return _error(unexpected_error(error), language())
    return 200, {"result": result}, {}


JSON_WHITESPACE = b" \t\n\r"  # bytes.strip() would take a form feed too, which is no JSON


def parse_params(body: bytes) -> dict[str, Any]:
    """Params are the whole body as a JSON object, whatever the Content-Type claims (curl -d sends a form
    type). An empty body (or one of JSON's whitespace only) means no params; any other JSON value (null, a
    list, a string) is refused."""
    if not body.strip(JSON_WHITESPACE):
        return {}
    try:
        params = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        details = (
            {"line": error.lineno, "column": error.colno} if isinstance(error, json.JSONDecodeError) else {}
        )
        raise RpcError(ErrorCode.INVALID_JSON, details=details) from None
    if not isinstance(params, dict):
        raise RpcError(ErrorCode.INVALID_REQUEST, PARAMS_NOT_OBJECT)
    return params


def _error(error: CocoonError, language: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    with translation.override(language):
        body = {"error": error.render()}
    headers = error.http_headers
    if error.code == ErrorCode.METHOD_NOT_ALLOWED:
        headers = headers | {"Allow": "POST"}
    return error.http_status, body, headers


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The whole body, or None once it grows past limit (the rest is left unread)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestAborted
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
