"""Reading usage: records (paged, newest first) and sums grouped by agent, sandbox, task, schedule,
model or day."""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils.translation import gettext_lazy as _

from cocoon import tenancy
from cocoon.actors import Actor
from cocoon.lookup import get_or_not_found
from usage.models import UsageRecord

GROUPS = {
    "agent": "agent_id",
    "sandbox": "sandbox_id",
    "task": "task_id",
    "schedule": "schedule_id",
    "model": "model",
    "provider": "provider",
    "day": "day",
}
SUMS = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens", "cost")
FILTERS = {"sandboxId": "sandbox_id", "agentId": "agent_id", "taskId": "task_id", "scheduleId": "schedule_id"}


@dataclass(frozen=True)
class Group:
    key: str
    requests: int
    sums: dict[str, Any]  # SUMS -> total


def matching(params: dict[str, Any], actor: Actor) -> QuerySet[UsageRecord]:
    """Records actor may see (its project's, also of sandboxes gone since: cocoon.tenancy) of the call's
    filters: sandboxId, agentId, taskId, scheduleId, from, to."""
    records = UsageRecord.objects.filter(tenancy.by_project(actor)).filter(
        **{field: params[wire] for wire, field in FILTERS.items() if params.get(wire)}
    )
    if start := params.get("from"):
        records = records.filter(at__gte=datetime.fromisoformat(start))
    if end := params.get("to"):
        records = records.filter(at__lt=datetime.fromisoformat(end))
    return records


def page(params: dict[str, Any], limit: int, actor: Actor) -> tuple[list[UsageRecord], str | None]:
    """One page, newest first, and the cursor of the next (None after the last)."""
    records = matching(params, actor)
    if cursor := params.get("cursor"):  # the last record of the page before
        last = get_or_not_found(
            UsageRecord.objects.all(),
            cursor,
            _("Usage record %(id)s (the cursor) does not exist."),
            id=cursor,
        )
        records = records.filter(at__lte=last.at).exclude(at=last.at, id__gte=last.id)
    found = list(records.order_by("-at", "-id")[: limit + 1])
    more = len(found) > limit
    found = found[:limit]
    return found, (found[-1].id if more else None)


def summary(params: dict[str, Any], group_by: str, actor: Actor) -> tuple[list[Group], Group]:
    """Sums per group (most cost first, then most tokens) and over all, of what actor may see."""
    records = matching(params, actor)
    totals = records.aggregate(requests=Count("id"), **{name: Sum(name) for name in SUMS})
    if group_by == "day":
        records = records.annotate(day=TruncDate("at"))
    field = GROUPS[group_by]
    rows = records.values(field).annotate(requests=Count("id"), **{name: Sum(name) for name in SUMS})
    groups = [
        Group(key=str(row[field] or ""), requests=row["requests"], sums={name: row[name] for name in SUMS})
        for row in rows
    ]
    if group_by == "day":
        groups.sort(key=lambda group: group.key)
    else:
        groups.sort(
            key=lambda group: (-(group.sums["cost"] or Decimal(0)), -(group.sums["output_tokens"] or 0))
        )
    return groups, Group(key="", requests=totals["requests"], sums={name: totals[name] for name in SUMS})
