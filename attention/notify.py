"""Notifications: attention items sent to the channels of settings notifications.channels.

Each (item, channel) is a Delivery row: the log people read (notifications.deliveries) and the queue the
Celery task `attention.tasks.deliver` works from. A delivery is due when the channel's delay has passed
(and its quiet hours are over); it is sent only if its item is still open then. A failed attempt is
tried again with backoff, up to MAX_ATTEMPTS; channels are sent apart, so one that hangs or fails holds
up no other, and never the poller or a call.

Channels are Apprise URLs (Slack, Discord, Matrix, ntfy, email, Teams, JSON webhooks, ...), or a signed
webhook: a JSON POST with X-Cocoon-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed
with the channel's secret> (docs/notifications.md shows how to check it).
"""

import hashlib
import hmac
import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import time as clock
from functools import partial
from typing import Any, Protocol

import apprise
import httpx
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from attention import links
from attention.choices import DeliveryState, ItemState
from attention.models import Delivery, Item
from attention.schemas import render_title, serialize_item
from cocoon import channel_secrets, config, system, vault
from cocoon.choices import ChannelType
from cocoon.errors import NotFound
from cocoon.schema import zone

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
BACKOFF_S = (5, 15, 60, 300, 900)  # before the 2nd, 3rd, ... attempt
SEND_TIMEOUT_S = 10.0
ERROR_MAX = 500
# A delivery that was due this long ago and is still scheduled lost its Celery message (a restart of
# the in-memory broker): the tick sends it. One in "sending" this long died with its worker.
LATE_S = 30
STUCK_S = 300
FAILING = "waits for the retry of the channel's last failed delivery"


class SendError(Exception):
    """The channel did not take the message: why, in a line."""


class DeliverTask(Protocol):
    """The Celery task attention.tasks.deliver, as enqueue hands it a delivery."""

    def apply_async(self, args: tuple[str], countdown: float) -> object: ...


# Registered by AttentionConfig.ready(): the tasks module calls this one, so this one does not import it.
_deliver: DeliverTask | None = None


def register_deliver(task: DeliverTask) -> None:
    global _deliver
    _deliver = task


def channels() -> dict[str, dict[str, Any]]:
    configured: dict[str, dict[str, Any]] = config.get_settings()["notifications"]["channels"]
    return configured


def hears(channel: dict[str, Any], item: Item, sandbox_name: str) -> bool:
    """Whether a channel's rules take this item: enabled, its kind, its sandbox by id or name."""
    if not channel.get("enabled", True):
        return False
    if (kinds := channel.get("kinds")) and item.kind not in kinds:
        return False
    sandboxes = channel.get("sandboxes")
    return not sandboxes or bool(({item.sandbox_id, sandbox_name} - {""}) & set(sandboxes))


def quiet_until(channel: dict[str, Any], now: datetime) -> datetime | None:
    """The end of the channel's quiet hours if now falls in them, else None."""
    quiet = channel.get("quietHours")
    if not quiet:
        return None
    local = now.astimezone(zone(quiet["timezone"]))
    start, end = (clock.fromisoformat(quiet[name]) for name in ("from", "to"))
    at = local.time()
    inside = (start <= at < end) if start <= end else (at >= start or at < end)
    if not inside:
        return None
    ends = local.replace(hour=end.hour, minute=end.minute, second=0, microsecond=0)
    if ends <= local:
        ends += timedelta(days=1)
    return ends


def _sandbox_name(item: Item) -> str:
    from sandboxes.models import Sandbox  # a lower layer; the name is what rules may name

    return Sandbox.objects.filter(pk=item.sandbox_id).values_list("name", flat=True).first() or ""


def schedule(item: Item, *, at: datetime | None = None) -> list[Delivery]:
    """Deliveries of a new (or snoozed) item to every channel that hears it, due after the channel's
    delay (or at a snooze's end), each handed to Celery once this transaction commits."""
    name = _sandbox_name(item) if item.sandbox_id else ""
    deliveries = [
        Delivery.objects.create(
            item=item,
            channel=channel_name,
            due_at=at or item.opened_at + timedelta(seconds=channel.get("delayS", 0)),
        )
        for channel_name, channel in channels().items()
        if hears(channel, item, name)
    ]
    for delivery in deliveries:
        # robust: a broker that refuses must not cost the publisher's own on-commit work (its event)
        transaction.on_commit(partial(enqueue, delivery), robust=True)
    return deliveries


def cancel(item: Item, why: str) -> None:
    """Deliveries of the item that are not sent yet will not be: it was closed, acked or snoozed."""
    item.deliveries.filter(state=DeliveryState.SCHEDULED).update(
        state=DeliveryState.SKIPPED, error=f"the item was {why} before it was due", updated_at=timezone.now()
    )


def enqueue(delivery: Delivery) -> None:
    assert _deliver is not None, "AttentionConfig.ready() registers the task"
    countdown = max(0.0, (delivery.due_at - timezone.now()).total_seconds())
    _deliver.apply_async((delivery.id,), countdown=countdown)


def _claim(delivery_id: str) -> Delivery | None:
    """The delivery, now "sending", if it is due and no one else sends it; else None."""
    claimed = Delivery.objects.filter(
        pk=delivery_id, state=DeliveryState.SCHEDULED, due_at__lte=timezone.now()
    ).update(state=DeliveryState.SENDING, updated_at=timezone.now())
    return Delivery.objects.select_related("item").get(pk=delivery_id) if claimed else None


def _finish(delivery: Delivery, state: str, error: str = "", due_at: datetime | None = None) -> None:
    delivery.state, delivery.error = state, error[:ERROR_MAX]
    if due_at is not None:
        delivery.due_at = due_at
    if state == DeliveryState.SENT:
        delivery.sent_at = timezone.now()
    delivery.save(update_fields=["state", "error", "due_at", "sent_at", "attempts", "updated_at"])
    if state == DeliveryState.SCHEDULED:
        enqueue(delivery)


def deliver(delivery_id: str) -> str | None:
    """Send one due delivery (the Celery task's body): its new state, or None if it was not due or
    someone else sends it."""
    delivery = _claim(delivery_id)
    if delivery is None:
        return None
    item, now = delivery.item, timezone.now()
    channel = channels().get(delivery.channel)
    if item.state != ItemState.OPEN or (item.snoozed_until and item.snoozed_until > now):
        _finish(delivery, DeliveryState.SKIPPED, f"the item was {item.state} when it was due")
    elif channel is None:
        _finish(delivery, DeliveryState.FAILED, "the channel was removed")
    elif not hears(channel, item, _sandbox_name(item)):
        _finish(delivery, DeliveryState.SKIPPED, "the channel's rules changed: it no longer hears of it")
    elif (ends := quiet_until(channel, now)) is not None:
        _finish(delivery, DeliveryState.SCHEDULED, "quiet hours", due_at=ends)
    elif not delivery.attempts and (retry := _failing_until(delivery, now)) is not None:
        # The channel failed a moment ago and is tried again then: this one waits for that try, so a
        # dead channel holds one worker thread at a time, not one per item.
        _finish(delivery, DeliveryState.SCHEDULED, FAILING, due_at=retry + timedelta(seconds=1))
    else:
        delivery.attempts += 1
        try:
            send(delivery.channel, channel, Message.of(item, delivery.id))
        except Exception as error:  # whatever it was (a plugin's bug, a vault key changed): an attempt
            why = str(error) if isinstance(error, SendError) else f"{type(error).__name__}: {error}"
            if delivery.attempts >= MAX_ATTEMPTS:
                _finish(delivery, DeliveryState.FAILED, why)
            else:
                backoff = BACKOFF_S[min(delivery.attempts, len(BACKOFF_S)) - 1]
                _finish(delivery, DeliveryState.SCHEDULED, why, due_at=now + timedelta(seconds=backoff))
            logger.warning(
                "notification %s to %s failed (attempt %s): %s",
                delivery.id,
                delivery.channel,
                delivery.attempts,
                why,
                exc_info=not isinstance(error, SendError),
            )
        else:
            _finish(delivery, DeliveryState.SENT)
    return delivery.state


def _failing_until(delivery: Delivery, now: datetime) -> datetime | None:
    """When the channel's failed delivery is tried next, if one failed and waits for its retry."""
    failed = Delivery.objects.filter(
        channel=delivery.channel, state=DeliveryState.SCHEDULED, attempts__gt=0, due_at__gt=now
    ).exclude(pk=delivery.pk)
    retry: datetime | None = failed.order_by("-due_at").values_list("due_at", flat=True).first()
    return retry


def resend_lost() -> int:
    """Hand Celery again what it lost (deliveries overdue or stuck in sending): the tick's job."""
    now = timezone.now()
    Delivery.objects.filter(
        state=DeliveryState.SENDING, updated_at__lt=now - timedelta(seconds=STUCK_S)
    ).update(state=DeliveryState.SCHEDULED, updated_at=now)
    lost = Delivery.objects.filter(state=DeliveryState.SCHEDULED, due_at__lt=now - timedelta(seconds=LATE_S))
    count = 0
    for delivery in lost:
        enqueue(delivery)
        count += 1
    return count


# -- what is sent, and how ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    title: str
    body: str
    payload: dict[str, Any]  # the signed webhook's JSON

    @classmethod
    def of(cls, item: Item, delivery_id: str) -> "Message":
        language = config.get_settings()["general"]["language"]
        link = links.make(item)
        title = render_title(item, language)
        body = "\n\n".join(part for part in (item.detail, link) if part)
        payload = {
            "type": "attention.item",
            "deliveryId": delivery_id,
            "item": serialize_item(item, language),
            "link": link,
        }
        return cls(title=title, body=body, payload=payload)

    @classmethod
    def test(cls, channel: str) -> "Message":
        title = f"cocoon: test of channel {channel}"
        payload = {"type": "notifications.test", "channel": channel, "link": system.public_url()}
        return cls(title=title, body="This is a test notification from cocoon.", payload=payload)


def signature(secret: str, body: bytes, at: int) -> str:
    """The X-Cocoon-Signature header of a signed webhook's body."""
    digest = hmac.new(secret.encode(), str(at).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={digest}"


def send(name: str, channel: dict[str, Any], message: Message) -> None:
    url = vault.read_secret(channel_secrets.channel_secret_name(name, "url"))
    if not url:
        raise SendError("the channel's URL is not in the vault")
    if channel["type"] == ChannelType.WEBHOOK:
        _send_webhook(name, url, message)
    else:
        _send_apprise(url, message)


def _send_webhook(name: str, url: str, message: Message) -> None:
    secret = vault.read_secret(channel_secrets.channel_secret_name(name, "secret"))
    if not secret:
        raise SendError("the webhook's secret is not in the vault")
    body = json.dumps(message.payload, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "cocoon-notifications",
        "X-Cocoon-Signature": signature(secret, body, int(time.time())),
        "X-Cocoon-Event": str(message.payload["type"]),
    }
    try:
        response = httpx.post(
            url, content=body, headers=headers, timeout=SEND_TIMEOUT_S, follow_redirects=False
        )
    except httpx.HTTPError as error:
        raise SendError(f"{type(error).__name__}: {error}") from error
    if not response.is_success:
        raise SendError(f"HTTP {response.status_code}")


class _ThreadLog(logging.Handler):
    """Apprise's warnings of this thread's send (its logger is shared by every worker thread)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.lines.append(record.getMessage().strip())


def _send_apprise(url: str, message: Message) -> None:
    # The plugin itself, not an Apprise object: that one sends from a pool of its own, and this
    # thread's log would not tell why it failed.
    plugin = apprise.Apprise.instantiate(url)
    if plugin is None:
        raise SendError("Apprise does not know this URL")
    log, apprise_logger = _ThreadLog(), logging.getLogger("apprise")
    apprise_logger.addHandler(log)
    try:
        # Plain text: what a sandbox's screen shows is never read as HTML or Markdown.
        ok = plugin.notify(body=message.body, title=message.title, body_format=apprise.NotifyFormat.TEXT)
    finally:
        apprise_logger.removeHandler(log)
    if not ok:
        raise SendError(log.lines[-1] if log.lines else "the service did not take the message")


def test(name: str) -> tuple[bool, str, float]:
    """Send a test message to a channel now: (sent, error, seconds)."""
    channel = channels().get(name)
    if channel is None:
        raise NotFound(_("Notification channel %(name)s does not exist."), name=name)
    started = time.monotonic()
    try:
        send(name, channel, Message.test(name))
    except SendError as error:
        return False, str(error)[:ERROR_MAX], time.monotonic() - started
    return True, "", time.monotonic() - started


def deliveries(
    *, item_id: str | None = None, channel: str | None = None, state: str | None = None, limit: int = 100
) -> list[Delivery]:
    query = Delivery.objects.all()
    if item_id:
        query = query.filter(item_id=item_id)
    if channel:
        query = query.filter(channel=channel)
    if state:
        query = query.filter(state=state)
    return list(query[:limit])
