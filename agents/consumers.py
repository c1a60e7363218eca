"""WS /v1/agents/<id>/attach?cols=&rows=&mode=ro — a browser-grade terminal onto an agent.

Each viewer is its own `tmux attach` client in the sandbox, so viewers come and go without touching the
agent; `mode=ro` attaches read-only and drops the viewer's input. Binary frames carry terminal bytes both
ways; a text frame {"type": "resize", "cols", "rows"} resizes. A viewer lasts only as long as its token or
session (cocoon.consumers.LiveCredentials): revoking it or logging out closes the terminal.

Bytes take the shortest way through cocoond: the terminal's descriptor is non-blocking and served on the
event loop itself (read when it is readable, written until it is full), so a keystroke and its echo cost
no thread and no hop between threads.
"""

import asyncio
import contextlib
import json
import os
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from agents.services import live_agent
from cocoon.consumers import CLOSE_UNAUTHORIZED, RECHECK_AFTER_S, LiveCredentials
from cocoon.errors import CocoonError, NotFound
from sandboxes.drivers.base import DriverError, TtySession
from sandboxes.nodes import driver_of

CLOSE_NOT_FOUND = 4404
CLOSE_CONFLICT = 4409


def _size(query: dict[str, list[str]], name: str, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(next(iter(query.get(name, ())), default))))
    except ValueError:
        return default


class AttachConsumer(LiveCredentials, AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.tty: TtySession | None = None
        self.pump: asyncio.Task[None] | None = None
        self.actor = self.scope.get("actor")
        await self.accept()
        if self.actor is None:
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        await self.join_auth_group()
        agent_id = self.scope["url_route"]["kwargs"]["agent_id"]
        try:
            agent = await database_sync_to_async(live_agent)(agent_id, self.actor)
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        except CocoonError:  # it has exited, or its sandbox is not running
            await self.close(code=CLOSE_CONFLICT)
            return
        query = self.scope["query"]
        self.read_only = (query.get("mode") or [""])[0] == "ro"
        cols, rows = _size(query, "cols", 120, 20, 500), _size(query, "rows", 40, 5, 300)
        try:
            driver = await database_sync_to_async(driver_of)(agent.sandbox_id)  # asks the database
            command = driver.agent_terminal_command(agent.id, read_only=self.read_only)
            tty = await asyncio.to_thread(driver.open_tty, agent.sandbox_id, command, cols=cols, rows=rows)
        except DriverError:
            await self.close(code=CLOSE_CONFLICT)
            return
        self.tty = tty
        self.output: asyncio.Queue[bytes] = asyncio.Queue()
        if first := tty.take_buffered():  # read off the descriptor already: no readiness tells
            self.output.put_nowait(first)
        self.fd = tty.fileno()
        os.set_blocking(self.fd, False)
        asyncio.get_running_loop().add_reader(self.fd, self._readable)
        self.pump = asyncio.create_task(self._pump())

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections on its one sync thread before every message: a hop
        # to that shared thread per keystroke. Input touches the database only in still_authorized, through
        # database_sync_to_async, which closes them itself.
        if message["type"] == "websocket.receive":
            await self.websocket_receive(message)
        else:
            await super().dispatch(message)

    def _readable(self) -> None:
        """One read, right on the loop (it does not wait: the descriptor is readable)."""
        assert self.tty is not None
        chunk = self.tty.read()
        if not chunk:  # readable yet empty: the session ended
            asyncio.get_running_loop().remove_reader(self.fd)
        self.output.put_nowait(chunk)

    async def _pump(self) -> None:
        """Output to the viewer in the order it was read, up to the end of the session."""
        while chunk := await self.output.get():
            await self.send(bytes_data=chunk)
        await self.close()

    async def _write(self, data: bytes) -> None:
        """All of data, the loop never blocked: what the terminal takes now, the rest as it makes room
        (the viewer's next frame waits meanwhile). A terminal that ended takes nothing: the pump closes."""
        assert self.tty is not None
        loop = asyncio.get_running_loop()
        with contextlib.suppress(OSError):
            while data := data[self.tty.write(data) :]:
                room = loop.create_future()
                loop.add_writer(self.fd, room.set_result, None)
                try:
                    await room
                finally:
                    loop.remove_writer(self.fd)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.tty is None:
            return
        if not await self.still_authorized(max_age=RECHECK_AFTER_S):
            await self.end_session()
            return
        if bytes_data is not None:
            if not self.read_only:
                await self._write(bytes_data)
            return
        try:
            message: Any = json.loads(text_data or "")
        except json.JSONDecodeError:
            return
        if isinstance(message, dict) and message.get("type") == "resize":
            cols = max(20, min(500, int(message.get("cols", 120))))
            rows = max(5, min(300, int(message.get("rows", 40))))
            await asyncio.to_thread(self.tty.resize, cols, rows)

    async def disconnect(self, code: int) -> None:
        await self.leave_auth_group()
        if self.pump is not None:
            asyncio.get_running_loop().remove_reader(self.fd)  # before the descriptor is closed
            self.pump.cancel()
        if self.tty is not None:
            tty, self.tty = self.tty, None
            await asyncio.to_thread(tty.close)
