"""The wire shapes of usage: records and sums, their JSON Schemas next to the dicts that match them."""

from decimal import Decimal
from typing import Any

from cocoon.schema import BOOLEAN, BUDGET, STRING, TIMESTAMP, enum, integer, nullable, obj
from usage.choices import Scope
from usage.models import UsageRecord
from usage.services import Group

NUMBER = {"type": "number"}
TOKENS = {
    "inputTokens": integer(minimum=0),
    "outputTokens": integer(minimum=0),
    "cacheWriteTokens": integer(minimum=0),
    "cacheReadTokens": integer(minimum=0),
}
RECORD = obj(
    {
        "id": STRING,
        "at": TIMESTAMP,
        "sandboxId": STRING,
        "agentId": nullable(STRING),
        "taskId": nullable(STRING),
        "scheduleId": nullable(STRING),
        "provider": STRING,
        "model": STRING,
        "method": STRING,
        "path": STRING,
        "status": integer(),
        "stream": BOOLEAN,
        "complete": BOOLEAN,
        "latencyMs": NUMBER,
        **TOKENS,
        "cost": NUMBER,
        "priced": BOOLEAN,
        "refused": BOOLEAN,  # answered by the proxy itself: a budget is spent
    }
)
BUDGET_STATE = obj(
    {
        "scope": enum(*Scope.values),
        "subject": STRING,
        "state": enum("ok", "warned", "exceeded"),
        "budget": BUDGET,
        "spentCost": NUMBER,
        "spentTokens": integer(minimum=0),
        "sandboxId": nullable(STRING),
        "agentId": nullable(STRING),
        "taskId": nullable(STRING),
    }
)
SUMS = obj({"key": STRING, "requests": integer(minimum=0), **TOKENS, "cost": NUMBER})


def _number(value: Decimal | None) -> float:
    return float(value or 0)


def serialize_record(record: UsageRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "at": record.at.isoformat(),
        "sandboxId": record.sandbox_id,
        "agentId": record.agent_id or None,
        "taskId": record.task_id or None,
        "scheduleId": record.schedule_id or None,
        "provider": record.provider,
        "model": record.model,
        "method": record.method,
        "path": record.path,
        "status": record.status,
        "stream": record.stream,
        "complete": record.complete,
        "latencyMs": record.latency_ms,
        "inputTokens": record.input_tokens,
        "outputTokens": record.output_tokens,
        "cacheWriteTokens": record.cache_write_tokens,
        "cacheReadTokens": record.cache_read_tokens,
        "cost": _number(record.cost),
        "priced": record.priced,
        "refused": record.refused,
    }


def serialize_group(group: Group) -> dict[str, Any]:
    sums = group.sums
    return {
        "key": group.key,
        "requests": group.requests,
        "inputTokens": sums["input_tokens"] or 0,
        "outputTokens": sums["output_tokens"] or 0,
        "cacheWriteTokens": sums["cache_write_tokens"] or 0,
        "cacheReadTokens": sums["cache_read_tokens"] or 0,
        "cost": _number(sums["cost"]),
    }
