"""The wire shapes of the core's entities (tokens, secrets, activity entries, the setup checklist): their
JSON Schemas and the dicts that match them, side by side. (cocoon/schema.py holds the helpers these
schemas are built with.) Services import this module to publish events, so it imports no service."""

from typing import Any

from django.utils import translation

from cocoon.choices import NetworkMode, Role, TokenScope
from cocoon.models import ActivityEntry, ApiToken, Invite, Membership, Project, ProjectSecret, Secret
from cocoon.schema import (
    ANY_OBJECT,
    BOOLEAN,
    BUDGET,
    INTEGER,
    STRING,
    TIMESTAMP,
    array,
    enum,
    integer,
    nullable,
    obj,
    string,
    timestamp,
)
from cocoon.settings_schema import PROVIDER_ID_PATTERN
from cocoon.types import CheckResult

PROJECT_ID = string(pattern="^[a-z0-9][a-z0-9-]{0,62}$")
# What a project's sandboxes that are not stopped (and its agents that have not exited) may take at once;
# a quota left out: no limit.
QUOTAS = obj(
    {
        "sandboxes": integer(minimum=0),
        "cpus": {"type": "number", "minimum": 0},
        "memoryMb": integer(minimum=0),
        "agents": integer(minimum=0),
        # What its agents may spend in one UTC day together (settings usage.currency); past it the
        # credential proxy refuses its sandboxes' requests until the next day or a raise.
        "dailyCost": {"type": "number", "exclusiveMinimum": 0, "maximum": 1_000_000_000},
    }
)
# A person's share of a project's quotas (Membership.quotas): what the sandboxes they made take at once.
SHARE_QUOTAS = obj({name: schema for name, schema in QUOTAS["properties"].items() if name != "dailyCost"})
MEMBER = obj({"user": STRING, "role": enum(*Role.values), "quotas": SHARE_QUOTAS, "since": TIMESTAMP})

INVITE = obj(
    {
        "id": STRING,
        "role": enum(*Role.values),
        "createdBy": STRING,
        "createdAt": TIMESTAMP,
        "expiresAt": TIMESTAMP,
    }
)
# A new invitation: the only answer that carries its link.
CREATED_INVITE = obj(INVITE["properties"] | {"url": STRING})
# serverSecrets: its sandboxes may use the server's secrets where it has none of its own.
PROJECT = obj(
    {"id": STRING, "name": STRING, "quotas": QUOTAS, "serverSecrets": BOOLEAN, "createdAt": TIMESTAMP}
)
# "own": the token sees only the sandboxes it created itself; "project": all of its project's.
TOKEN_SANDBOXES = enum("project", "own")
# The most an agent token may ask for (cocoon.actors.Ceilings): network modes a sandbox of its may have,
# providers its agents may get, a sandbox's CPUs and memory. Left out: no ceiling of that kind.
CEILINGS = obj(
    {
        "networks": array(enum(*NetworkMode.values), uniqueItems=True),
        "providers": array(string(pattern=PROVIDER_ID_PATTERN), maxItems=20, uniqueItems=True),
        "cpus": {"type": "number", "exclusiveMinimum": 0, "maximum": 1024},
        "memoryMb": integer(minimum=16, maximum=4 * 1024 * 1024),
        # What everything the token makes may spend together: each sandbox, task or steering agent it
        # makes gets a budget carved out of what is left (cocoon.tenancy.carving).
        "budget": obj(
            {"cost": BUDGET["properties"]["cost"], "tokens": BUDGET["properties"]["tokens"]}, minProperties=1
        ),
    }
)

# A steering agent's token: the agent it dies with, and the token that spawned that agent (null: none).
STEERING = {"agentId": nullable(STRING), "parentId": nullable(STRING)}
# What of a budget ceiling the token has carved out for what it made ({} without one).
CARVED = obj({"cost": {"type": "number"}, "tokens": INTEGER})
TOKEN = obj(
    {
        "id": STRING,
        "name": STRING,
        "scope": enum(*TokenScope.values),
        "project": nullable(STRING),  # null: an admin token, in every project
        "sandboxes": TOKEN_SANDBOXES,
        "user": nullable(STRING),  # a user-scope token's person
        "ceilings": CEILINGS,
        "carved": CARVED,
        **STEERING,
        "createdAt": TIMESTAMP,
        "lastUsedAt": nullable(TIMESTAMP),
        "expiresAt": nullable(TIMESTAMP),  # null: valid until revoked
    }
)
# A new token: the only answer that carries the plain token.
CREATED_TOKEN = obj(
    {
        "id": STRING,
        "name": STRING,
        "scope": STRING,
        "project": nullable(STRING),
        "sandboxes": TOKEN_SANDBOXES,
        "user": nullable(STRING),
        "ceilings": CEILINGS,
        "carved": CARVED,
        **STEERING,
        "expiresAt": nullable(TIMESTAMP),
        "token": STRING,
    }
)
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
SETUP_STATUS = obj(
    {
        "ready": BOOLEAN,
        "items": array(
            obj(
                {
                    "key": STRING,
                    "title": STRING,
                    "ok": BOOLEAN,
                    "detail": STRING,
                    # the method that repairs the item, if one does (the UI's fix button)
                    "fix": nullable(STRING),
                }
            )
        ),
    }
)


def _token_reach(token: ApiToken) -> dict[str, Any]:
    return {
        "project": token.project_id,
        "sandboxes": "own" if token.own_sandboxes else "project",
        "user": token.user.get_username() if token.user else None,
        "ceilings": token.ceilings,
        "carved": token.carved,
        "agentId": token.agent or None,
        "parentId": token.parent_id,
    }


def serialize_invite(invite: Invite) -> dict[str, Any]:
    return {
        "id": invite.id,
        "role": invite.role,
        "createdBy": invite.created_by,
        "createdAt": invite.created_at.isoformat(),
        "expiresAt": invite.expires_at.isoformat(),
    }


def serialize_project(project: Project) -> dict[str, Any]:
    return {
        "id": project.id,
        "name": project.name,
        "quotas": project.quotas,
        "serverSecrets": project.server_secrets,
        "createdAt": project.created_at.isoformat(),
    }


def serialize_member(member: Membership) -> dict[str, Any]:
    return {
        "user": member.user.get_username(),
        "role": member.role,
        "quotas": member.quotas,
        "since": member.created_at.isoformat(),
    }


def serialize_token(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "scope": token.scope,
        **_token_reach(token),
        "createdAt": token.created_at.isoformat(),
        "lastUsedAt": timestamp(token.last_used_at),
        "expiresAt": timestamp(token.expires_at),
    }


def serialize_created_token(token: ApiToken, plain: str) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "scope": token.scope,
        **_token_reach(token),
        "expiresAt": timestamp(token.expires_at),
        "token": plain,
    }


def serialize_secret(secret: Secret | ProjectSecret, *, raw: bool) -> dict[str, Any]:
    return {
        "name": secret.name,
        "raw": raw,
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


def serialize_setup_status(results: list[CheckResult], language: str) -> dict[str, Any]:
    with translation.override(language):
        items = [
            {
                "key": result.check.key,
                "title": str(result.check.title),
                "ok": result.ok,
                "detail": str(result.detail),
                "fix": result.fix,
            }
            for result in results
        ]
    return {"ready": all(result.ok for result in results), "items": items}
