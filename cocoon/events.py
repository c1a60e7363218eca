"""The EventBus: typed events broadcast over the Channels layer to every WebSocket subscriber.

Events go to the group "events.all"; each connection filters by its subscriptions (type, sandbox,
agent). Events about an agent also go to "agent.<id>", where synchronous code can listen() for them
(agent.wait). Publishing waits for the surrounding transaction to commit, so no one hears of a change
that was rolled back.
"""

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, NotRequired, TypedDict, TypeVar

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from cocoon.ids import new_id

logger = logging.getLogger(__name__)

ALL_EVENTS_GROUP = "events.all"
HANDLER_TYPE = "event.message"  # -> consumer method event_message
T = TypeVar("T")


def agent_group(agent_id: str) -> str:
    return f"agent.{agent_id}"


class Event(TypedDict):
    id: str
    type: str
    at: str
    data: dict[str, Any]
    sandboxId: NotRequired[str]
    agentId: NotRequired[str]


_server_loop: asyncio.AbstractEventLoop | None = None


def bind_server_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Remember the ASGI server's loop.

    The in-memory channel layer's queues belong to that loop, so events published from other
    threads (the embedded Celery worker) must be handed to it rather than to a loop of their own.
    """
    global _server_loop
    _server_loop = loop


def publish(
    event_type: str,
    data: dict[str, Any],
    *,
    sandbox_id: str | None = None,
    agent_id: str | None = None,
) -> Event:
    event = Event(id=new_id("ev"), type=event_type, at=timezone.now().isoformat(), data=data)
    if sandbox_id:
        event["sandboxId"] = sandbox_id
    if agent_id:
        event["agentId"] = agent_id
    transaction.on_commit(lambda: _send(event))
    return event


def _on_layer_loop(coroutine: Coroutine[Any, Any, T], timeout: float = 10) -> T:
    """Run a channel-layer coroutine from synchronous code, on the loop the layer's queues live on."""
    loop = _server_loop
    if loop is not None and loop.is_running():
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=timeout)

    async def run() -> T:
        return await coroutine

    return async_to_sync(run)()


def _send(event: Event) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": HANDLER_TYPE, "event": event}
    groups = [ALL_EVENTS_GROUP]
    if agent_id := event.get("agentId"):
        groups.append(agent_group(agent_id))
    try:
        for group in groups:
            _on_layer_loop(layer.group_send(group, message))
    except Exception:
        # A lost event must never undo the state change that caused it.
        logger.exception("could not publish event %s", event["type"])


@contextmanager
def listen(group: str) -> Iterator[Callable[[float], Event | None]]:
    """Hear the events sent to a group from synchronous code: yields next(timeout) -> the next event,
    or None when none came in time. Events sent before listen() are not heard; read state after it."""
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer is configured")
    channel = _on_layer_loop(layer.new_channel())
    _on_layer_loop(layer.group_add(group, channel))

    def receive(timeout: float) -> Event | None:
        try:
            message = _on_layer_loop(asyncio.wait_for(layer.receive(channel), timeout), timeout + 10)
        except TimeoutError:
            return None
        return message["event"]

    try:
        yield receive
    finally:
        _on_layer_loop(layer.group_discard(group, channel))


def matches(subscription: dict[str, Any], event: Event) -> bool:
    types = subscription.get("types")
    if types and event["type"] not in types:
        return False
    if (sandbox_id := subscription.get("sandboxId")) and event.get("sandboxId") != sandbox_id:
        return False
    agent_id = subscription.get("agentId")
    return not agent_id or event.get("agentId") == agent_id
