"""POST /mcp: MCP Streamable HTTP (stateless) with tools generated from the method registry.

Only `agent_side` methods become tools (never `admin` ones), named like `sandbox_create`, with the
registry's descriptions and JSON Schemas; results come back as structured content plus JSON text.
Daphne runs no ASGI lifespan, so the SDK's session manager is started lazily, once per process, by the
first request; auth happens here because Django's middleware does not run for this path. A request in
flight is cancelled, and answered 401, when its token is revoked meanwhile (tokens.recheck_connections).
"""

import asyncio
import contextlib
import json
from collections.abc import Awaitable, MutableMapping
from typing import Any

import mcp_types as types
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

import cocoon
from cocoon import calls, tokens
from cocoon.actors import Actor
from cocoon.auth import request_actor
from cocoon.consumers import SESSION_ENDED
from cocoon.errors import CocoonError, ErrorCode, RpcError
from cocoon.middleware import scope_language, send_error
from cocoon.registry import Method, registry

UNKNOWN_TOOL = _("Unknown tool %(name)s.")


def tool_name(method: Method) -> str:
    return method.name.replace(".", "_")


def exposed_methods() -> dict[str, Method]:
    return {
        tool_name(method): method for method in registry.all() if method.agent_side and not method.ws_only
    }


async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
    tools = [
        types.Tool(
            name=name,
            description=method.description,
            input_schema=method.params,
            # Structured content must be an object, so every result is wrapped as {"result": ...}.
            output_schema={"type": "object", "properties": {"result": method.result}, "required": ["result"]},
        )
        for name, method in exposed_methods().items()
    ]
    return types.ListToolsResult(tools=tools)


def _error_result(error: CocoonError, language: str) -> types.CallToolResult:
    with translation.override(language):
        rendered = {"error": error.render()}
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(rendered))], is_error=True)


async def call_tool(context: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    scope = context.request.scope
    actor, language = scope["actor"], scope["cocoon_language"]
    method = exposed_methods().get(params.name)
    if method is None:
        return _error_result(RpcError(ErrorCode.NOT_FOUND, UNKNOWN_TOOL, name=params.name), language)
    try:
        result = await calls.in_thread(
            actor.token_id, registry.dispatch, method.name, params.arguments or {}, actor, language
        )
    except CocoonError as error:
        return _error_result(error, language)
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(result))], structured_content={"result": result}
    )


server = Server("cocoon", version=cocoon.__version__, on_list_tools=list_tools, on_call_tool=call_tool)


class McpApp:
    """The ASGI app for /mcp: token auth, then the SDK's stateless session manager."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None
        self.lock = asyncio.Lock()
        self.task: asyncio.Task | None = None

    async def _started(self) -> StreamableHTTPSessionManager:
        async with self.lock:
            if self.manager is None:
                manager = StreamableHTTPSessionManager(
                    app=server,
                    stateless=True,
                    json_response=True,
                    # Every request needs a bearer token, which a DNS-rebinding page cannot have; the
                    # SDK's host check would otherwise refuse anything but localhost behind a proxy.
                    security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
                )
                running = asyncio.Event()

                async def run() -> None:
                    async with manager.run():
                        running.set()
                        await asyncio.Event().wait()

                self.task = asyncio.ensure_future(run())
                await running.wait()
                self.manager = manager
        return self.manager

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        language = await scope_language(scope)
        try:
            actor, _headers, _query = await request_actor(scope)
        except CocoonError as error:  # rate_limited
            await send_error(scope, receive, send, error, language)
            return
        if actor is None:
            await send_error(scope, receive, send, RpcError(ErrorCode.UNAUTHORIZED), language)
            return
        manager = await self._started()
        response_started = False

        async def tracked_send(message: MutableMapping[str, Any]) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        request = manager.handle_request(
            dict(scope, actor=actor, cocoon_language=language), receive, tracked_send
        )
        if await _revoked_while(request, actor) and not response_started:
            await send_error(scope, receive, send, RpcError(ErrorCode.UNAUTHORIZED, SESSION_ENDED), language)


async def _revoked_while(request: Awaitable[None], actor: Actor) -> bool:
    """Serve one request, listening on the actor's auth group meanwhile: if the token is revoked before the
    request is done, cancel it (a long agent.wait must not answer a revoked token) and return True."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = tokens.auth_group(actor.token_id)
    await layer.group_add(group, channel)
    serving = asyncio.ensure_future(request)
    recheck: asyncio.Future | None = None
    try:
        while True:
            recheck = asyncio.ensure_future(layer.receive(channel))
            await asyncio.wait({serving, recheck}, return_when=asyncio.FIRST_COMPLETED)
            if serving.done():
                serving.result()  # re-raise what the SDK raised
                return False
            if not await database_sync_to_async(tokens.is_live, thread_sensitive=False)(actor):
                return True
    finally:
        for task in (serving, recheck):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await layer.group_discard(group, channel)
