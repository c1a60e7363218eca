"""The EventBus: typed events broadcast over the Channels layer to every WebSocket subscriber.

Events go to the group "events.all"; each connection filters by its subscriptions (type, sandbox,
agent). Events about an agent also go to "agent.<id>", where synchronous code can listen() for them
(agent.wait). Publishing waits for the surrounding transaction to commit, so no one hears of a change
that was rolled back.

Each event type is declared with register_types() next to the code that publishes it, with who may see
it (Visibility); a connection hears only what its actor may see, and an undeclared type is admin-only.
An event about a sandbox carries its owner (cocoon.tenancy), looked up as it is published: an actor bound
to a project hears only its own project's, and an event of a sandbox gone already only those bound to none.

Upper layers hear events in-process with observe(): an observer runs when the event is published, in
the publisher's transaction, so what it writes commits or rolls back with the change it heard of.
"""

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, NotRequired, TypedDict, TypeVar

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from cocoon import tenancy
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import REDIS_ERRORS
from cocoon.ids import new_id

logger = logging.getLogger(__name__)

ALL_EVENTS_GROUP = "events.all"
HANDLER_TYPE = "event.message"  # -> consumer method event_message
T = TypeVar("T")
VISIBILITY: dict[str, str] = {}  # event type -> Visibility; types not in it are admin-only
OBSERVERS: dict[str, list[Callable[["Event"], None]]] = {}


def register_types(*event_types: str, visibility: Visibility) -> None:
    """Declare event types and who may see them (agent tokens only what their methods could read)."""
    duplicate = VISIBILITY.keys() & set(event_types)
    if duplicate:
        raise ValueError(f"event types registered twice: {sorted(duplicate)}")
    VISIBILITY.update(dict.fromkeys(event_types, visibility))


def observe(*event_types: str) -> Callable[[Callable[["Event"], None]], Callable[["Event"], None]]:
    """Decorator: call the function with every event of these types as it is published."""

    def decorator(observer: Callable[["Event"], None]) -> Callable[["Event"], None]:
        for event_type in event_types:
            OBSERVERS.setdefault(event_type, []).append(observer)
        return observer

    return decorator


def _notify_observers(event: "Event") -> None:
    for observer in OBSERVERS.get(event["type"], ()):
        try:
            with transaction.atomic():  # a savepoint: a failing observer undoes only its own writes
                observer(event)
        except Exception:
            # An observer's failure must never undo the state change it heard of.
            logger.exception("observer %s failed on %s", observer.__qualname__, event["type"])


def agent_group(agent_id: str) -> str:
    return f"agent.{agent_id}"


class Event(TypedDict):
    id: str
    type: str
    at: str
    data: dict[str, Any]
    sandboxId: NotRequired[str]
    agentId: NotRequired[str]


# What the channel layer raises while its backend (Redis) is unreachable: a restart, a crash, a cut.
LAYER_ERRORS = REDIS_ERRORS
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
    visibility: str | None = None,
    owner: tenancy.Owner | None = None,
) -> Event:
    """Send an event once the transaction commits; visibility overrides the type's (activity entries), and
    owner is the owner of what it is about when that is no sandbox (a schedule, a task without one)."""
    event = Event(id=new_id("ev"), type=event_type, at=timezone.now().isoformat(), data=data)
    if sandbox_id:
        event["sandboxId"] = sandbox_id
    if agent_id:
        event["agentId"] = agent_id
    visibility = visibility or VISIBILITY.get(event_type, Visibility.ADMIN)
    owned = [owner.project, owner.creator] if owner else _owner(sandbox_id) if sandbox_id else None
    _notify_observers(event)
    transaction.on_commit(lambda: _send(event, visibility, owned))
    return event


def _owner(sandbox_id: str) -> list[str | None]:
    """The owner of an event's sandbox as the message carries it: [project, creator], [] when unknown."""
    owner = tenancy.sandbox_owner(sandbox_id)
    return [owner.project, owner.creator] if owner else []


def may_hear(actor: Actor, message: dict[str, Any]) -> bool:
    """Whether a connection of actor hears an event's message: its visibility, and its sandbox's owner."""
    if not actor.may_see(message.get("visibility", Visibility.ADMIN)):
        return False
    owner = message.get("owner")
    if owner is None or actor.sees_everything:
        return True
    return bool(owner) and tenancy.may_see(actor, tenancy.Owner(*owner))


def _on_layer_loop(coroutine: Coroutine[Any, Any, T], timeout: float = 10) -> T:
    """Run a channel-layer coroutine from synchronous code, on the loop the layer's queues live on."""
    loop = _server_loop
    if loop is not None and loop.is_running():
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=timeout)

    async def run() -> T:
        return await coroutine

    return async_to_sync(run)()


def _send(event: Event, visibility: str, owner: list[str | None] | None) -> None:
    message = {"type": HANDLER_TYPE, "event": event, "visibility": visibility, "owner": owner}
    send_to_group(ALL_EVENTS_GROUP, message)
    if agent_id := event.get("agentId"):
        send_to_group(agent_group(agent_id), message)


def send_to_group(group: str, message: dict[str, Any]) -> None:
    """Send a channel-layer message to a group from synchronous code, now (callers wait for their commit)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        _on_layer_loop(layer.group_send(group, message))
    except Exception:
        # A lost message must never undo the state change that caused it.
        logger.exception("could not send %s to %s", message["type"], group)


@contextmanager
def listen(group: str) -> Iterator[Callable[[float], Event | None]]:
    """Hear the events sent to a group from synchronous code: yields next(timeout) -> the next event,
    or None when none came in time. Events sent before listen() are not heard; read state after it.

    While the layer is unreachable (Redis restarting) next() hears nothing, and joins the group again
    once it can (a restarted Redis has forgotten it): an event may be missed then, never a call failed,
    so callers read the state again whenever next() returns None."""
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer is configured")
    channel = _on_layer_loop(layer.new_channel())
    joined = False

    def join() -> bool:
        nonlocal joined
        if not joined:
            try:
                _on_layer_loop(layer.group_add(group, channel))
                joined = True
            except LAYER_ERRORS as error:
                logger.warning("not listening to %s for now: %s", group, error)
        return joined

    def receive(timeout: float) -> Event | None:
        nonlocal joined
        started = time.monotonic()
        if join():
            try:
                message = _on_layer_loop(asyncio.wait_for(layer.receive(channel), timeout), timeout + 10)
            except TimeoutError:
                return None
            except LAYER_ERRORS as error:
                logger.warning("lost the events of %s for now: %s", group, error)
                joined = False
            else:
                return message["event"]
        time.sleep(max(0.0, timeout - (time.monotonic() - started)))  # as long as an event-less wait
        return None

    join()
    try:
        yield receive
    finally:
        if joined:
            try:
                _on_layer_loop(layer.group_discard(group, channel))
            except LAYER_ERRORS as error:
                logger.warning("could not leave %s: %s", group, error)


def matches(subscription: dict[str, Any], event: Event) -> bool:
    types = subscription.get("types")
    if types and event["type"] not in types:
        return False
    if (sandbox_id := subscription.get("sandboxId")) and event.get("sandboxId") != sandbox_id:
        return False
    agent_id = subscription.get("agentId")
    return not agent_id or event.get("agentId") == agent_id
