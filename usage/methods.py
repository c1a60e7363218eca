"""RPC methods of usage: what agents' LLM requests used and cost, as the credential proxy metered them."""

from typing import Any

from cocoon import config
from cocoon.registry import Call, registry
from cocoon.schema import STRING, TIMESTAMP, array, enum, integer, nullable, obj, string
from usage import services
from usage.schemas import RECORD, SUMS, serialize_group, serialize_record

ID = string(maxLength=40)
FILTERS = {
    "sandboxId": ID,
    "agentId": ID,
    "taskId": ID,
    "scheduleId": ID,
    "from": TIMESTAMP,
    "to": TIMESTAMP,
}


@registry.method(
    "usage.records",
    description="LLM requests of agents as the credential proxy metered them (model, tokens read from the "
    "provider's answer, cost by settings usage.prices), newest first; filters sandboxId, agentId, taskId, "
    "scheduleId, from, to; pass next as cursor for the page after.",
    params=obj({**FILTERS, "limit": integer(minimum=1, maximum=1000), "cursor": string(maxLength=200)}),
    result=obj({"records": array(RECORD), "next": nullable(STRING)}),
    agent_side=True,
)
def usage_records(call: Call) -> dict[str, Any]:
    records, cursor = services.page(call.params, call.params.get("limit", 100))
    return {"records": [serialize_record(record) for record in records], "next": cursor}


@registry.method(
    "usage.summary",
    description="Requests, tokens and cost summed per agent, sandbox, task, schedule, model, provider or day "
    "(most cost first; days in order), and over all; the same filters as usage.records.",
    params=obj({**FILTERS, "groupBy": enum(*services.GROUPS)}, required=("groupBy",)),
    result=obj({"currency": STRING, "groups": array(SUMS), "total": SUMS}),
    agent_side=True,
)
def usage_summary(call: Call) -> dict[str, Any]:
    groups, total = services.summary(call.params, call.params["groupBy"])
    return {
        "currency": config.get_settings()["usage"]["currency"],
        "groups": [serialize_group(group) for group in groups],
        "total": serialize_group(total),
    }
