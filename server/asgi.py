"""ASGI entry point: Django for HTTP, Channels for WebSockets."""

import asyncio
import os
from typing import Any

import django
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.handlers.asgi import ASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cocoon.settings")


class Handler(ASGIHandler):
    # Django hands a streamed body to the server in pieces of this size, and Daphne's cost is per
    # piece: at Django's 64 KiB an archive download took twice the CPU per byte (bench/workspace.py).
    chunk_size = 1 << 20


django.setup(set_prefix=False)  # as get_asgi_application does, before the imports below
# Static files (the UI's scripts, xterm.js) come from cocoond itself: no CDN, no separate web server.
django_application = ASGIStaticFilesHandler(Handler())

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from agents.consumers import AttachConsumer  # noqa: E402
from cocoon import events, httprpc  # noqa: E402
from cocoon.auth import WebSocketTokenMiddleware  # noqa: E402
from cocoon.consumers import RpcConsumer  # noqa: E402
from cocoon.mcp import McpApp  # noqa: E402
from cocoon.middleware import ForwardedMiddleware  # noqa: E402

mcp_application = McpApp()


async def http_application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """/mcp goes to the MCP SDK, /v1/rpc/<method> to cocoon's RPC app, everything else to Django."""
    if scope["path"].rstrip("/") == "/mcp":
        await mcp_application(scope, receive, send)
    elif method := httprpc.method_of(scope["path"]):
        await httprpc.application(method, scope, receive, send)
    else:
        await django_application(scope, receive, send)


router = ProtocolTypeRouter(
    {
        "http": http_application,
        "websocket": WebSocketTokenMiddleware(
            URLRouter(
                [
                    path("v1/ws", RpcConsumer.as_asgi()),
                    path("v1/agents/<str:agent_id>/attach", AttachConsumer.as_asgi()),
                ]
            )
        ),
    }
)

# Outermost: the real client and scheme behind the trusted proxy, and only our own host names.
served = ForwardedMiddleware(router)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    events.bind_server_loop(asyncio.get_running_loop())
    await served(scope, receive, send)
