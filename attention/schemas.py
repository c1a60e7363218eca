"""The wire shapes of attention items and deliveries: their JSON Schemas and the dicts that match them."""

from typing import Any

from django.utils import translation
from django.utils.translation import gettext_lazy as _

from attention.choices import DeliveryState, ItemState
from attention.models import Delivery, Item
from cocoon.choices import AttentionKind
from cocoon.schema import STRING, TIMESTAMP, enum, integer, nullable, obj, string, timestamp

ITEM_ID = string(pattern="^at_[a-z0-9]+$", maxLength=40)
TITLES = {
    AttentionKind.AGENT_BLOCKED: _("Agent “%(agent)s” (%(profile)s) in %(sandbox)s waits for an answer."),
    AttentionKind.AGENT_DONE: _("Agent “%(agent)s” (%(profile)s) in %(sandbox)s is done."),
    AttentionKind.AGENT_FAILED: _("Agent “%(agent)s” (%(profile)s) in %(sandbox)s failed: %(fix)s"),
    AttentionKind.AGENT_EXITED: _(
        "Agent “%(agent)s” (%(profile)s) in %(sandbox)s ended (%(reason)s, code %(code)s)."
    ),
    AttentionKind.TASK_REVIEW: _("Task %(title)s needs a review."),
    AttentionKind.TASK_FAILED: _("Task %(title)s failed."),
    AttentionKind.SCHEDULE_FAILED: _("Schedule %(name)s could not start a run."),
    AttentionKind.SETUP: _("The setup checklist is not ok: %(checks)s."),
    AttentionKind.BUDGET: _("The budget of %(scope)s %(subject)s is %(state)s."),
}
# What a failed agent's item says went wrong and what to do, by its statusReason (the CLI hook's word or
# agents.choices.ErrorReason).
NOT_LOGGED_IN = _(
    "it is not logged in to its provider: add the provider's key in Settings → Providers (or the "
    "secret its profile names), then spawn it again."
)
FIXES = {
    "not_logged_in": NOT_LOGGED_IN,
    "invalid_api_key": NOT_LOGGED_IN,
    "authentication_failed": NOT_LOGGED_IN,
    "rate_limit": _("its provider is rate limiting it: send it the task again once the limit has passed."),
    "billing_error": _("its provider's account cannot pay for the request: check its plan and billing."),
    "server_error": _("its provider answered with a server error: send it the task again later."),
    "api_error": _("its provider answered with an error (its screen shows which): try again later."),
    "invalid_request": _("its provider refused the request as invalid (its screen shows why)."),
    "max_output_tokens": _("its answer was cut off at the output limit: ask it to go on."),
}
OTHER_FAILURE = _("its turn ended on an error (%(why)s): its screen shows which.")


def fix_of(why: str) -> str:
    """What a failed agent's item says to do, in the active language."""
    return str(FIXES[why]) if why in FIXES else str(OTHER_FAILURE) % {"why": why}


ITEM = obj(
    {
        "id": STRING,
        "kind": enum(*AttentionKind.values),
        "state": enum(*ItemState.values),
        "title": STRING,
        "detail": STRING,
        "sandboxId": nullable(STRING),
        "agentId": nullable(STRING),
        "taskId": nullable(STRING),
        "scheduleId": nullable(STRING),
        "openedAt": TIMESTAMP,
        "updatedAt": TIMESTAMP,
        "ackedAt": nullable(TIMESTAMP),
        "ackedBy": nullable(STRING),
        "snoozedUntil": nullable(TIMESTAMP),
        "closedAt": nullable(TIMESTAMP),
    }
)
DELIVERY = obj(
    {
        "id": STRING,
        "itemId": STRING,
        "channel": STRING,
        "state": enum(*DeliveryState.values),
        "attempts": integer(minimum=0),
        "error": STRING,
        "dueAt": TIMESTAMP,
        "sentAt": nullable(TIMESTAMP),
        "createdAt": TIMESTAMP,
    }
)


def render_title(item: Item, language: str) -> str:
    with translation.override(language):
        try:
            params = item.params
            if item.kind == AttentionKind.AGENT_FAILED:
                params = params | {"fix": fix_of(str(params.get("why", "")))}
            title: str = str(TITLES[AttentionKind(item.kind)]) % params
        except (KeyError, TypeError, ValueError):
            title = item.kind
        return title


def serialize_item(item: Item, language: str) -> dict[str, Any]:
    return {
        "id": item.id,
        "kind": item.kind,
        "state": item.state,
        "title": render_title(item, language),
        "detail": item.detail,
        "sandboxId": item.sandbox_id or None,
        "agentId": item.agent_id or None,
        "taskId": item.task_id or None,
        "scheduleId": item.schedule_id or None,
        "openedAt": item.opened_at.isoformat(),
        "updatedAt": item.updated_at.isoformat(),
        "ackedAt": timestamp(item.acked_at),
        "ackedBy": item.acked_by or None,
        "snoozedUntil": timestamp(item.snoozed_until),
        "closedAt": timestamp(item.closed_at),
    }


def serialize_delivery(delivery: Delivery) -> dict[str, Any]:
    return {
        "id": delivery.id,
        "itemId": delivery.item_id,
        "channel": delivery.channel,
        "state": delivery.state,
        "attempts": delivery.attempts,
        "error": delivery.error,
        "dueAt": delivery.due_at.isoformat(),
        "sentAt": timestamp(delivery.sent_at),
        "createdAt": delivery.created_at.isoformat(),
    }
