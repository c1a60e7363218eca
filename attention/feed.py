"""The attention feed: an item for each thing that waits for a human, opened and closed by what happens.

Items follow the events agents, tasks and schedules publish (cocoon.events.observe): an agent turns
blocked -> an item with its question; it goes on -> the item closes. The observers run in the
publisher's transaction, so an item exists exactly when the state that caused it was committed.
"""

import logging
import unicodedata
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import regex
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agents.choices import AgentStatus, ExitReason
from agents.models import Agent
from agents.schemas import screen_tail
from attention import notify
from attention.choices import ItemState
from attention.models import Item
from attention.schemas import serialize_item
from cocoon import activity, events, tenancy
from cocoon.actors import Actor
from cocoon.choices import AttentionKind, Visibility
from cocoon.errors import Conflict
from cocoon.events import Event
from cocoon.lookup import get_or_not_found
from cocoon.setup import run_checks
from sandboxes.models import Sandbox
from scheduling.choices import TaskStatus
from scheduling.models import Schedule, Task
from usage.budgets import describe

logger = logging.getLogger(__name__)

AGENT_KINDS = (
    AttentionKind.AGENT_BLOCKED,
    AttentionKind.AGENT_DONE,
    AttentionKind.AGENT_FAILED,
    AttentionKind.AGENT_EXITED,
)
TASK_KINDS = {TaskStatus.REVIEW: AttentionKind.TASK_REVIEW, TaskStatus.FAILED: AttentionKind.TASK_FAILED}
# Ended by a person through cocoon: nothing to tell them.
OWN_ENDINGS = {ExitReason.KILLED, ExitReason.SANDBOX_STOPPED}
SETUP_SUBJECT = "setup"
DETAIL_MAX = 1000
QUESTION_LINES = 3  # of the screen's bottom, when no line of it matches the question's pattern
CONTROL = {"Cc", "Cf", "Cs", "Co", "Cn"}
ASKED_AGAIN_AFTER = timedelta(seconds=1)  # the answer's own echo on the screen is no new question

events.register_types("attention.updated", visibility=Visibility.AGENT)
activity.register_messages(
    {
        "attention.acked": _("%(title)s: acknowledged."),
        "attention.snoozed": _("%(title)s: snoozed for %(minutes)s minutes."),
        "attention.answered": _("%(title)s: answered from a notification (%(answer)s)."),
    },
    visibility=Visibility.AGENT,
)


def publish(item: Item) -> None:
    events.publish(
        "attention.updated",
        serialize_item(item, "en"),
        sandbox_id=item.sandbox_id or None,
        agent_id=item.agent_id or None,
        visibility=item.visibility,
        owner=_owner(item),
    )


def _owner(item: Item) -> tenancy.Owner | None:
    """Whose an item of no sandbox is (as visible_items has it): its task's or its schedule's owner; None
    for one of a sandbox (the event looks that up) or of the server."""
    if item.sandbox_id:
        return None
    owned: Task | Schedule | None = None
    if item.task_id:
        owned = Task.objects.filter(pk=item.task_id).first()
    elif item.schedule_id:
        owned = Schedule.objects.filter(pk=item.schedule_id).first()
    return owned.owner if owned else None


def live(kind: str, subject: str) -> Item | None:
    return Item.objects.filter(kind=kind, subject=subject).exclude(state=ItemState.CLOSED).first()


def printable(text: str) -> str:
    """A sandbox's screen text as an item may carry it on: no control characters (an escape sequence
    for a terminal that shows a mail or a log), bounded."""
    return "".join(c for c in text if c in "\n\t" or unicodedata.category(c) not in CONTROL)[:DETAIL_MAX]


def open_item(kind: str, subject: str, *, params: dict[str, Any], detail: str = "", **where: str) -> Item:
    """The live item of this cause with this title and detail: opened (and sent to the channels) if
    there is none, else brought up to date."""
    detail = printable(detail)
    params = {name: printable(value) if isinstance(value, str) else value for name, value in params.items()}
    item = live(kind, subject)
    if item is not None:
        if (item.params, item.detail) != (params, detail):
            item.params, item.detail = params, detail
            item.save(update_fields=["params", "detail", "updated_at"])
            publish(item)
        return item

    visibility = Visibility.ADMIN if kind == AttentionKind.SETUP else Visibility.AGENT
    try:
        with transaction.atomic():
            item = Item.objects.create(
                kind=kind, subject=subject, params=params, detail=detail, visibility=visibility, **where
            )
    except IntegrityError:  # another process (the poller's worker, cocoond) opened it a moment ago
        return open_item(kind, subject, params=params, detail=detail, **where)
    notify.schedule(item)
    publish(item)
    return item


def close_items(items: QuerySet[Item]) -> int:
    closed = 0
    for item in items.exclude(state=ItemState.CLOSED):
        item.state, item.closed_at = ItemState.CLOSED, timezone.now()
        item.save(update_fields=["state", "closed_at", "updated_at"])
        notify.cancel(item, "closed")
        publish(item)
        closed += 1
    return closed


# -- what opens and closes items ---------------------------------------------------------------------


def ended_unexpectedly(agent: dict[str, Any]) -> bool:
    """An agent (its wire shape) that ended neither by its own clean exit nor by a person: with an error
    code, or through an engine restart or a vanished session."""
    reason = agent["exitReason"]
    unexpected = reason != ExitReason.EXITED or agent["exitCode"] != 0
    return agent["status"] == AgentStatus.EXITED and reason not in OWN_ENDINGS and unexpected


def _agent_kind(agent: dict[str, Any]) -> str | None:
    status = agent["status"]
    if status == AgentStatus.BLOCKED:
        return AttentionKind.AGENT_BLOCKED
    if status == AgentStatus.DONE:
        return AttentionKind.AGENT_DONE
    if status == AgentStatus.ERROR:
        return AttentionKind.AGENT_FAILED
    return AttentionKind.AGENT_EXITED if ended_unexpectedly(agent) else None


def question_of(agent: Agent) -> str:
    """The question a blocked agent shows: the bottom line its profile's pattern matched, else the
    screen's last lines (a hook said it is blocked; the screen shows why)."""
    if agent.screen_question:
        try:
            pattern = regex.compile(agent.screen_question, regex.VERSION0)
            for line in reversed(screen_tail(agent.last_screen, 10).split("\n")):
                if pattern.search(line, timeout=0.05):
                    return line.strip()
        except (regex.error, TimeoutError):
            pass
    return screen_tail(agent.last_screen, QUESTION_LINES)


def _agent_detail(kind: str, agent: Agent) -> str:
    if kind == AttentionKind.AGENT_BLOCKED:
        return question_of(agent)
    if kind == AttentionKind.AGENT_EXITED:
        return f"{agent.exit_reason} (exit code {agent.exit_code})"
    return screen_tail(agent.last_screen, QUESTION_LINES)


@events.observe("agent.updated")
def on_agent(event: Event) -> None:
    data = event["data"]
    if data["status"] == AgentStatus.UNKNOWN:  # a moment the poller could not tell: nothing changes
        return
    kind = _agent_kind(data)
    others = Item.objects.filter(subject=data["id"], kind__in=AGENT_KINDS).exclude(kind=kind)
    close_items(others)
    if kind is None:
        return
    agent = Agent.objects.select_related("sandbox").filter(pk=data["id"]).first()
    if agent is None:
        return
    params: dict[str, Any] = {
        "agent": agent.name or agent.id,
        "profile": agent.profile,
        "sandbox": agent.sandbox.name,
    }
    if kind == AttentionKind.AGENT_EXITED:
        params |= {"reason": agent.exit_reason, "code": agent.exit_code}
    if kind == AttentionKind.AGENT_FAILED:
        params |= {"why": agent.status_reason}
    where = {"sandbox_id": agent.sandbox_id, "agent_id": agent.id}
    item = open_item(kind, agent.id, params=params, detail=_agent_detail(kind, agent), **where)
    if item.answered_at and datetime.fromisoformat(event["at"]) > item.answered_at + ASKED_AGAIN_AFTER:
        # Still blocked after an answer from a link, and its screen moved since: it asks again (an
        # answer it did not take, the next question). The used link is dead: a new one is sent.
        Item.objects.filter(pk=item.pk).update(answered_at=None)
        if item.state == ItemState.OPEN:
            notify.schedule(item, at=timezone.now())


@events.observe("sandbox.deleted")
def on_sandbox_deleted(event: Event) -> None:
    """Its agents are gone with it (their tasks stay, with their own items)."""
    close_items(Item.objects.filter(sandbox_id=event["data"]["id"], kind__in=AGENT_KINDS))


@events.observe("task.updated")
def on_task(event: Event) -> None:
    task = event["data"]
    kind = TASK_KINDS.get(task["status"])
    close_items(Item.objects.filter(subject=task["id"], kind__in=TASK_KINDS.values()).exclude(kind=kind))
    if task["scheduleId"]:  # a run made after the failure: the schedule starts runs again
        failed = Item.objects.filter(subject=task["scheduleId"], kind=AttentionKind.SCHEDULE_FAILED)
        close_items(failed.filter(opened_at__lt=datetime.fromisoformat(task["createdAt"])))
    if kind is None:
        return
    where = {
        "sandbox_id": task["sandboxId"] or "",
        "task_id": task["id"],
        "schedule_id": task["scheduleId"] or "",
    }
    detail = (task["report"] or {}).get("summary") or task["reason"] or ""
    open_item(
        kind, task["id"], params={"task": task["id"], "title": task["title"]}, detail=str(detail), **where
    )


@events.observe("usage.budget")
def on_budget(event: Event) -> None:
    """A budget nearly or wholly spent needs someone to raise it (or to stop what spends it)."""
    budget = event["data"]
    subject = f"{budget['scope']}:{budget['subject']}"
    items = Item.objects.filter(subject=subject, kind=AttentionKind.BUDGET)
    if budget["state"] == "ok":
        close_items(items)
        return
    spent, limit = describe(budget["budget"], Decimal(str(budget["spentCost"])), budget["spentTokens"])
    params = {"scope": budget["scope"], "subject": budget["subject"], "state": budget["state"]}
    where = {
        "sandbox_id": budget["sandboxId"] or "",
        "agent_id": budget["agentId"] or "",
        "task_id": budget["taskId"] or "",
    }
    before = live(AttentionKind.BUDGET, subject)
    item = open_item(AttentionKind.BUDGET, subject, params=params, detail=f"{spent} of {limit}", **where)
    if before is not None and before.params.get("state") != budget["state"]:  # warned, now spent: again
        notify.schedule(item)


@events.observe("schedule.deleted")
def on_schedule_deleted(event: Event) -> None:
    close_items(Item.objects.filter(subject=event["data"]["id"], kind=AttentionKind.SCHEDULE_FAILED))


@events.observe("activity")
def on_activity(event: Event) -> None:
    entry = event["data"]
    if entry["key"] == "schedule.run_failed" and (schedule_id := entry["params"].get("schedule")):
        params = {"name": entry["params"]["name"]}
        detail = str(entry["params"].get("error", ""))
        open_item(
            AttentionKind.SCHEDULE_FAILED, schedule_id, params=params, detail=detail, schedule_id=schedule_id
        )


def check_setup() -> Item | None:
    """The setup checklist as an item: open while any check is not ok (admins only)."""
    failing = [result for result in run_checks() if not result.ok]
    with transaction.atomic():
        if not failing:
            close_items(Item.objects.filter(kind=AttentionKind.SETUP, subject=SETUP_SUBJECT))
            return None
        keys = ", ".join(result.check.key for result in failing)
        detail = "\n".join(f"{result.check.title}: {result.detail}" for result in failing)
        return open_item(AttentionKind.SETUP, SETUP_SUBJECT, params={"checks": keys}, detail=detail)


# -- what people do with items -----------------------------------------------------------------------


def visible_items(actor: Actor) -> QuerySet[Item]:
    """The items actor may see: by their visibility, and (cocoon.tenancy) those of its sandboxes, of its
    tasks or schedules when they name no sandbox, and the server's own (setup, the day's budget)."""
    items = Item.objects.all() if actor.is_admin else Item.objects.filter(visibility=Visibility.AGENT)
    if actor.sees_everything:
        return items
    return items.filter(
        Q(sandbox_id__in=Sandbox.objects.visible_to(actor).values("id"))
        | Q(sandbox_id="", task_id__in=Task.objects.filter(tenancy.visible(actor)).values("id"))
        | Q(
            sandbox_id="",
            task_id="",
            schedule_id__in=Schedule.objects.filter(tenancy.visible(actor)).values("id"),
        )
        | Q(sandbox_id="", task_id="", schedule_id="")
    )


def list_items(
    actor: Actor, *, state: str = "open", sandbox_id: str | None = None, limit: int = 100
) -> list[Item]:
    items = visible_items(actor)
    if state == "open":  # a snoozed item is back once its time has come
        items = items.filter(state=ItemState.OPEN).filter(
            Q(snoozed_until=None) | Q(snoozed_until__lte=timezone.now())
        )
    elif state == "acked":
        items = items.filter(state=ItemState.ACKED)
    if sandbox_id:
        items = items.filter(sandbox_id=sandbox_id)
    return list(items[:limit])


def get_item(item_id: str, actor: Actor) -> Item:
    return get_or_not_found(
        visible_items(actor), item_id, _("Attention item %(id)s does not exist."), id=item_id
    )


def title_params(item: Item) -> dict[str, Any]:
    return {"title": serialize_item(item, "en")["title"]}


@transaction.atomic
def ack(item_id: str, *, actor: Actor) -> Item:
    item = get_item(item_id, actor)
    if item.state == ItemState.CLOSED:
        raise Conflict(_("Attention item %(id)s is closed: its cause went away."), id=item.id)
    if item.state == ItemState.OPEN:
        item.state, item.acked_at, item.acked_by = ItemState.ACKED, timezone.now(), actor.label
        item.save(update_fields=["state", "acked_at", "acked_by", "updated_at"])
        notify.cancel(item, "acknowledged")
        activity.record(
            "attention.acked",
            title_params(item),
            actor=actor,
            sandbox_id=item.sandbox_id,
            agent_id=item.agent_id,
        )
        publish(item)
    return item


@transaction.atomic
def snooze(item_id: str, minutes: int, *, actor: Actor) -> Item:
    """Hide an open item for a while; when the time has come it is open again and sent once more."""
    item = get_item(item_id, actor)
    if item.state != ItemState.OPEN:
        raise Conflict(
            _("Only an open attention item can be snoozed; %(id)s is %(state)s."),
            id=item.id,
            state=item.state,
        )
    item.snoozed_until = timezone.now() + timedelta(minutes=minutes)
    item.save(update_fields=["snoozed_until", "updated_at"])
    notify.cancel(item, "snoozed")
    notify.schedule(item, at=item.snoozed_until)
    activity.record(
        "attention.snoozed",
        title_params(item) | {"minutes": minutes},
        actor=actor,
        sandbox_id=item.sandbox_id,
        agent_id=item.agent_id,
    )
    publish(item)
    return item
