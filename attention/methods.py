"""RPC methods of the attention feed and its notifications."""

from typing import Any

from attention import feed, notify
from attention.choices import DeliveryState
from attention.schemas import DELIVERY, ITEM, ITEM_ID, serialize_delivery, serialize_item
from cocoon.registry import Call, registry
from cocoon.schema import BOOLEAN, STRING, array, enum, integer, obj, string
from cocoon.settings_schema import CHANNEL_NAME_PATTERN

ITEM_BY_ID = obj({"itemId": ITEM_ID}, required=("itemId",))
CHANNEL_NAME = string(pattern=CHANNEL_NAME_PATTERN)


@registry.method(
    "attention.list",
    reads=True,
    description="What waits for a human, newest first: agents blocked (with their question), done or "
    "ended unexpectedly, tasks in review or failed, schedules that could not start a run, the setup "
    "checklist. state open (default; snoozed items once their time has come), acked, or all (closed too).",
    params=obj(
        {
            "state": enum("open", "acked", "all"),
            "sandboxId": string(maxLength=40),
            "limit": integer(minimum=1, maximum=1000),
        }
    ),
    result=array(ITEM),
    agent_side=True,
)
def attention_list(call: Call) -> list[dict[str, Any]]:
    params = call.params
    items = feed.list_items(
        call.actor,
        state=params.get("state", "open"),
        sandbox_id=params.get("sandboxId"),
        limit=params.get("limit", 100),
    )
    return [serialize_item(item, call.language) for item in items]


@registry.method(
    "attention.get",
    reads=True,
    description="One item, in any state.",
    params=ITEM_BY_ID,
    result=ITEM,
    agent_side=True,
)
def attention_get(call: Call) -> dict[str, Any]:
    return serialize_item(feed.get_item(call.params["itemId"], call.actor), call.language)


@registry.method(
    "attention.ack",
    description="Acknowledge an item: no more notifications of it; it stays (acked) until its cause goes "
    "away.",
    params=ITEM_BY_ID,
    result=ITEM,
    agent_side=True,
)
def attention_ack(call: Call) -> dict[str, Any]:
    return serialize_item(feed.ack(call.params["itemId"], actor=call.actor), call.language)


@registry.method(
    "attention.snooze",
    description="Hide an open item for some minutes; then it is open again and sent to the channels once "
    "more.",
    params=obj(
        {"itemId": ITEM_ID, "minutes": integer(minimum=1, maximum=7 * 24 * 60)},
        required=("itemId", "minutes"),
    ),
    result=ITEM,
    agent_side=True,
)
def attention_snooze(call: Call) -> dict[str, Any]:
    params = call.params
    return serialize_item(feed.snooze(params["itemId"], params["minutes"], actor=call.actor), call.language)


@registry.method(
    "notifications.deliveries",
    reads=True,
    description="The delivery log: each item sent (or to be sent) to each channel, newest first, with its "
    "attempts and last error.",
    params=obj(
        {
            "itemId": ITEM_ID,
            "channel": CHANNEL_NAME,
            "state": enum(*DeliveryState.values),
            "limit": integer(minimum=1, maximum=1000),
        }
    ),
    result=array(DELIVERY),
    admin=True,
)
def notifications_deliveries(call: Call) -> list[dict[str, Any]]:
    params = call.params
    found = notify.deliveries(
        item_id=params.get("itemId"),
        channel=params.get("channel"),
        state=params.get("state"),
        limit=params.get("limit", 100),
    )
    return [serialize_delivery(delivery) for delivery in found]


@registry.method(
    "notifications.test",
    description="Send a test message to a channel of settings notifications.channels now.",
    params=obj({"channel": CHANNEL_NAME}, required=("channel",)),
    result=obj({"channel": STRING, "sent": BOOLEAN, "error": STRING, "durationMs": integer()}),
    admin=True,
)
def notifications_test(call: Call) -> dict[str, Any]:
    channel = call.params["channel"]
    sent, error, seconds = notify.test(channel)
    return {"channel": channel, "sent": sent, "error": error, "durationMs": round(seconds * 1000)}
