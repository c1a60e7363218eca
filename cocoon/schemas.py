"""The wire shapes of the core's entities (tokens, secrets, activity entries): their JSON Schemas and the
dicts that match them, side by side. (cocoon/schema.py holds the helpers these schemas are built with.)"""

from typing import Any

from cocoon import vault
from cocoon.choices import TokenScope
from cocoon.models import ActivityEntry, ApiToken, Secret
from cocoon.schema import ANY_OBJECT, BOOLEAN, INTEGER, STRING, TIMESTAMP, enum, nullable, obj

TOKEN = obj(
    {
        "id": STRING,
        "name": STRING,
        "scope": enum(*TokenScope.values),
        "createdAt": TIMESTAMP,
        "lastUsedAt": nullable(TIMESTAMP),
    }
)
# A new token: the only answer that carries the plain token.
CREATED_TOKEN = obj({"id": STRING, "name": STRING, "scope": STRING, "token": STRING})
SECRET = obj({"name": STRING, "raw": BOOLEAN, "createdAt": TIMESTAMP, "updatedAt": TIMESTAMP})
# message: rendered in the reader's language (activity.list; the consumer adds it to "activity" events).
ACTIVITY_ENTRY = obj(
    {
        "id": INTEGER,
        "key": STRING,
        "params": ANY_OBJECT,
        "message": STRING,
        "actor": STRING,
        "sandboxId": nullable(STRING),
        "agentId": nullable(STRING),
        "createdAt": TIMESTAMP,
    }
)


def serialize_token(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "scope": token.scope,
        "createdAt": token.created_at.isoformat(),
        "lastUsedAt": token.last_used_at.isoformat() if token.last_used_at else None,
    }


def serialize_created_token(token: ApiToken, plain: str) -> dict[str, Any]:
    return {"id": token.id, "name": token.name, "scope": token.scope, "token": plain}


def serialize_secret(secret: Secret) -> dict[str, Any]:
    return {
        "name": secret.name,
        "raw": vault.is_raw(secret.name),
        "createdAt": secret.created_at.isoformat(),
        "updatedAt": secret.updated_at.isoformat(),
    }


def serialize_activity_entry(entry: ActivityEntry) -> dict[str, Any]:
    """Without its message, which each reader gets in their own language."""
    return {
        "id": entry.id,
        "key": entry.key,
        "params": entry.params,
        "actor": entry.actor,
        "sandboxId": entry.sandbox_id or None,
        "agentId": entry.agent_id or None,
        "createdAt": entry.created_at.isoformat(),
    }
