"""WebSocket /v1/ws: RPC frames and event subscriptions on one connection."""

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from django.utils import translation
from django.utils.translation import gettext_lazy as _

from cocoon import activity, auth, calls, events, tokens
from cocoon.actors import Actor
from cocoon.errors import CocoonError, ErrorCode, RpcError, unexpected_error
from cocoon.i18n import language_of_scope
from cocoon.ids import new_id
from cocoon.registry import registry

logger = logging.getLogger(__name__)

CLOSE_UNAUTHORIZED = 4401
# The channel layer (Redis) failed under the connection (503, as 4401 is 401): events may have been missed
# meanwhile, so the client connects again, subscribes again and reads state afresh. (Daphne's WebSocket
# library lets a server close only with 1000 or 3000-4999.)
CLOSE_LAYER_LOST = 4503
LAYER_LOST = _("The event stream was interrupted (the server lost Redis); connect again and subscribe.")
CLEANUP_TIMEOUT_S = 2
SESSION_ENDED = _("This token was revoked or its session has ended.")
MAX_SUBSCRIPTIONS = 100
# How stale a credentials check may be before events or terminal input are passed on; calls always check.
RECHECK_AFTER_S = 1.0


class LiveCredentials(AsyncWebsocketConsumer):
    """For WebSocket consumers: a connection lasts only as long as the token or session it was opened with.

    It joins its actor's group (tokens.auth_group), where a revocation, a logout or a user's password
    change asks it to check again (auth_recheck); it ends as soon as a check fails.
    """

    actor: Actor | None
    auth_group: str | None = None
    checked_at = 0.0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The consumer, closed cleanly (CLOSE_LAYER_LOST, after layer_lost()) when the channel layer fails
        under it, instead of dying with 1011 or living on deaf to the groups a restarted Redis forgot."""
        try:
            await super().__call__(scope, receive, send)
        except events.LAYER_ERRORS as error:
            logger.warning("closing a WebSocket: the channel layer failed (%s)", error)
            with contextlib.suppress(Exception):
                await self.layer_lost()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.disconnect(CLOSE_LAYER_LOST), CLEANUP_TIMEOUT_S)

    async def layer_lost(self) -> None:
        await self.close(code=CLOSE_LAYER_LOST)

    async def join_auth_group(self) -> None:
        assert self.actor is not None, "only a connection with an actor joins its group"
        self.auth_group = tokens.auth_group(self.actor.token_id)
        self.checked_at = time.monotonic()
        await self.channel_layer.group_add(self.auth_group, self.channel_name)

    async def leave_auth_group(self) -> None:
        if self.auth_group is not None:
            await self.channel_layer.group_discard(self.auth_group, self.channel_name)

    async def still_authorized(self, max_age: float = 0) -> bool:
        """Check the credentials again unless the last check is younger than max_age seconds."""
        if self.actor is None:
            return False
        if time.monotonic() - self.checked_at < max_age:
            return True
        actor = await database_sync_to_async(auth.current_actor, thread_sensitive=False)(
            self.actor, self.scope.get("session_key")
        )
        self.checked_at = time.monotonic()
        # Gone, or its rights changed (a person's role or project, a superuser no more): it ends, and a
        # new connection gets the rights it has now.
        return actor is not None and actor == self.actor

    async def auth_recheck(self, message: dict[str, Any]) -> None:
        if not await self.still_authorized():
            await self.end_session()

    async def end_session(self) -> None:
        """Close for good; the actor is forgotten first, so nothing more is answered or forwarded."""
        if self.actor is None:
            return
        self.actor = None
        await self.close(code=CLOSE_UNAUTHORIZED)


class RpcConsumer(LiveCredentials, AsyncJsonWebsocketConsumer):
    """{"id", "method", "params"} -> {"id", "result"} | {"id", "error"}; events as {"subscription", "event"}.

    Calls run concurrently (a bounded wait must not hold up the next call or the events);
    events.* run inline so a subscription's result always precedes its first event. Every call checks the
    token (or session) again; events are forwarded only as far as the actor may see them.
    """

    async def connect(self) -> None:
        self.actor = self.scope.get("actor")
        self.subscriptions: dict[str, dict[str, Any]] = {}
        self.calls: set[asyncio.Task] = set()
        self.language = await database_sync_to_async(language_of_scope)(
            self.scope["headers_by_name"], self.scope["query"]
        )
        await self.accept()
        if self.actor is None:
            await self.send_json({"id": None, "error": self._render(RpcError(ErrorCode.UNAUTHORIZED))})
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        await self.join_auth_group()

    async def layer_lost(self) -> None:
        """Say why in a last frame (a close reason does not pass through the server), then close."""
        error = RpcError(ErrorCode.UNAVAILABLE, LAYER_LOST)
        await self.send_json({"id": None, "error": self._render(error)})
        await super().layer_lost()

    async def disconnect(self, code: int) -> None:
        for task in self.calls:
            task.cancel()
        if self.subscriptions:
            await self.channel_layer.group_discard(events.ALL_EVENTS_GROUP, self.channel_name)
        await self.leave_auth_group()

    async def end_session(self, call_id: Any = None) -> None:
        if self.actor is not None:
            error = RpcError(ErrorCode.UNAUTHORIZED, SESSION_ENDED)
            await self.send_json({"id": call_id, "error": self._render(error)})
        await super().end_session()

    @classmethod
    async def decode_json(cls, text_data: str) -> Any:
        try:
            return json.loads(text_data)
        except json.JSONDecodeError:
            return RpcError(ErrorCode.INVALID_JSON)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if self.actor is None:
            return
        if isinstance(content, RpcError):
            await self.send_json({"id": None, "error": self._render(content)})
            return
        if not isinstance(content, dict) or not isinstance(content.get("method"), str):
            error = RpcError(ErrorCode.INVALID_REQUEST, _('A frame is {"id", "method", "params"}.'))
            call_id = content.get("id") if isinstance(content, dict) else None
            await self.send_json({"id": call_id, "error": self._render(error)})
            return
        method = registry.find(content["method"])
        if method is not None and method.ws_only:
            await self._answer(content, self._dispatch_inline)
            if self.subscriptions:
                await self.channel_layer.group_add(events.ALL_EVENTS_GROUP, self.channel_name)
            return
        task = asyncio.ensure_future(self._answer(content, self._dispatch_in_thread))
        self.calls.add(task)
        task.add_done_callback(self.calls.discard)

    def _dispatch_inline(self, content: dict[str, Any], actor: Actor) -> Any:
        return registry.dispatch(
            content["method"], content.get("params"), actor, self.language, connection=self
        )

    async def _dispatch_in_thread(self, content: dict[str, Any], actor: Actor) -> Any:
        return await calls.in_thread(actor.token_id, self._dispatch_inline, content, actor)

    async def _answer(self, content: dict[str, Any], dispatch: Any) -> None:
        call_id = content.get("id")
        if not await self.still_authorized():
            await self.end_session(call_id)
            return
        try:
            # The actor as just checked: another call may end the session while this one runs.
            result = dispatch(content, self.actor)
            if asyncio.iscoroutine(result):
                result = await result
        except CocoonError as error:
            await self.send_json({"id": call_id, "error": self._render(error)})
        except Exception as error:
            logger.exception("unhandled error in %s", content["method"])
            await self.send_json({"id": call_id, "error": self._render(unexpected_error(error))})
        else:
            await self.send_json({"id": call_id, "result": result})

    def _render(self, error: CocoonError) -> dict[str, Any]:
        with translation.override(self.language):
            return error.render()

    # -- subscriptions (called by the events.* handlers) ------------------------------------------

    def add_subscription(self, filters: dict[str, Any]) -> str:
        if len(self.subscriptions) >= MAX_SUBSCRIPTIONS:
            raise RpcError(ErrorCode.CONFLICT, _("Too many subscriptions on this connection."))
        subscription = new_id("sub")
        self.subscriptions[subscription] = filters
        return subscription

    def remove_subscription(self, subscription: str) -> None:
        if self.subscriptions.pop(subscription, None) is None:
            raise RpcError(ErrorCode.NOT_FOUND, _("No such subscription."))

    async def event_message(self, message: dict[str, Any]) -> None:
        event: events.Event = message["event"]
        if self.actor is None or not events.may_hear(self.actor, message):
            return
        matching = [name for name, filters in self.subscriptions.items() if events.matches(filters, event)]
        if not matching:
            return
        if not await self.still_authorized(max_age=RECHECK_AFTER_S):
            await self.end_session()
            return
        if event["type"] == "activity":
            data = event["data"]
            event = {
                **event,
                "data": data | {"message": activity.render(data["key"], data["params"], self.language)},
            }
        for subscription in matching:
            await self.send_json({"subscription": subscription, "event": event})
