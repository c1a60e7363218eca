"""The wire shapes of egress: denied attempts, the proxy's status, providers and a provider check; their
JSON Schemas and the dicts that match them, side by side."""

from typing import Any

from django.utils import translation

from cocoon import settings_schema
from cocoon.choices import ProviderKind
from cocoon.schema import BOOLEAN, INTEGER, STRING, TIMESTAMP, array, enum, nullable, obj
from egress.models import DeniedAttempt, Fence
from egress.types import NodeProxyStatus, Provider, ProviderCheck, ProxyStatus

DENIED = obj(
    {
        "sandboxId": nullable(STRING),
        "source": STRING,
        "host": STRING,
        "port": INTEGER,
        "reason": STRING,
        "count": INTEGER,
        "firstAt": TIMESTAMP,
        "lastAt": TIMESTAMP,
    }
)
# The open sandboxes' fence on a node: in force when error is null.
FENCE = obj({"node": STRING, "error": nullable(STRING), "updatedAt": TIMESTAMP})
EGRESS_STATUS = obj(
    {
        "enforced": BOOLEAN,
        "running": BOOLEAN,
        "image": STRING,
        "address": nullable(STRING),
        "policyVersion": nullable(INTEGER),
        "acknowledgedVersion": nullable(INTEGER),
        # Why the proxy refused the current policy (it keeps serving the last one it could use).
        "policyError": nullable(STRING),
        # The remote nodes' own proxies (those in use), each the same but for its node.
        "nodes": array(
            obj(
                {
                    "nodeId": STRING,
                    "name": STRING,
                    "running": BOOLEAN,
                    "policyVersion": nullable(INTEGER),
                    "acknowledgedVersion": nullable(INTEGER),
                    "policyError": nullable(STRING),
                }
            )
        ),
    }
)
PROVIDER = obj(
    {
        "id": STRING,
        "kind": enum(*ProviderKind.values),
        "baseUrl": STRING,
        "secret": STRING,
        "auth": enum(*settings_schema.PROVIDER_AUTH),
        "builtin": BOOLEAN,
        "secretSet": BOOLEAN,
        "models": array(STRING),
    }
)
PROVIDER_CHECK = obj(
    {
        "ok": BOOLEAN,
        "result": enum("ok", "unreachable", "unauthorized", "error"),
        "message": STRING,
        "status": nullable(INTEGER),
        "models": array(STRING),
    }
)


def serialize_fence(row: Fence) -> dict[str, Any]:
    return {"node": row.node, "error": row.error or None, "updatedAt": row.updated_at.isoformat()}


def serialize_denied(row: DeniedAttempt) -> dict[str, Any]:
    return {
        "sandboxId": row.sandbox_id or None,
        "source": row.source,
        "host": row.host,
        "port": row.port,
        "reason": row.reason,
        "count": row.count,
        "firstAt": row.first_at.isoformat(),
        "lastAt": row.last_at.isoformat(),
    }


def serialize_egress_status(status: ProxyStatus | None, nodes: list[NodeProxyStatus]) -> dict[str, Any]:
    """status is None where the driver does not enforce egress (there is no local proxy container)."""
    on_nodes = [
        {
            "nodeId": node.node_id,
            "name": node.name,
            "running": node.running,
            "policyVersion": node.policy_version,
            "acknowledgedVersion": node.acknowledged_version,
            "policyError": node.policy_error,
        }
        for node in nodes
    ]
    return {
        "enforced": status is not None,
        "running": status is not None and status.running,
        "image": status.image if status else "",
        "address": status.address if status else None,
        "policyVersion": status.policy_version if status else None,
        "acknowledgedVersion": status.acknowledged_version if status else None,
        "policyError": status.policy_error if status else None,
        "nodes": on_nodes,
    }


def serialize_provider(provider: Provider) -> dict[str, Any]:
    return {
        "id": provider.id,
        "kind": provider.entry["kind"],
        "baseUrl": provider.entry["baseUrl"],
        "secret": provider.entry.get("secret", ""),
        "auth": provider.entry.get("auth", "bearer"),
        "builtin": provider.builtin,
        "secretSet": provider.secret_set,
        "models": provider.entry.get("models", []),
    }


def serialize_provider_check(check: ProviderCheck, language: str) -> dict[str, Any]:
    with translation.override(language):
        message = str(check.message)
    return {
        "ok": check.result == "ok",
        "result": check.result,
        "message": message,
        "status": check.status,
        "models": check.models,
    }
