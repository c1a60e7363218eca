"""RPC methods of the core: system, settings, secrets, tokens, activity, events."""

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import activity, config, invites, setup, system, tenancy, tokens, vault
from cocoon.choices import Role, TokenScope
from cocoon.errors import Forbidden
from cocoon.registry import Call, registry
from cocoon.schema import (
    ANY_OBJECT,
    BOOLEAN,
    EMPTY,
    INTEGER,
    STRING,
    array,
    enum,
    integer,
    nullable,
    obj,
    string,
)
from cocoon.schemas import (
    ACTIVITY_ENTRY,
    CEILINGS,
    CREATED_INVITE,
    CREATED_TOKEN,
    INVITE,
    MEMBER,
    PROJECT,
    PROJECT_ID,
    QUOTAS,
    SECRET,
    SETUP_STATUS,
    SHARE_QUOTAS,
    TOKEN,
    TOKEN_SANDBOXES,
    serialize_activity_entry,
    serialize_created_token,
    serialize_invite,
    serialize_member,
    serialize_project,
    serialize_secret,
    serialize_setup_status,
    serialize_token,
)
from cocoon.settings_schema import PATCH_SCHEMA, SECRET_NAME_PATTERN, SETTINGS_SCHEMA
from cocoon.tasks import prune_activity

NAME = string(minLength=1, maxLength=100)
ID = string(minLength=1, maxLength=40)
MAX_TOKEN_DAYS = 3650
# What tokens.create and projects.create_token take alike.
TOKEN_FIELDS = {
    "name": NAME,
    # Left out: valid until revoked. Afterwards it answers token_expired.
    "expiresInDays": integer(minimum=1, maximum=MAX_TOKEN_DAYS),
    # Which of its project's sandboxes an agent token sees, and the most it may ask for.
    "sandboxes": TOKEN_SANDBOXES,
    "ceilings": CEILINGS,
}

METHOD_INFO = obj(
    {
        "name": STRING,
        "description": STRING,
        "params": ANY_OBJECT,
        "result": ANY_OBJECT,
        "admin": BOOLEAN,
        "agentSide": BOOLEAN,
        "wsOnly": BOOLEAN,
        "reads": BOOLEAN,  # changes nothing: a viewer may call it
    }
)
SUBSCRIPTION_FILTER = obj(
    {
        "types": array(string(minLength=1, maxLength=100), maxItems=100),
        "sandboxId": ID,
        "agentId": ID,
    }
)


# -- system ------------------------------------------------------------------------------------------


@registry.method(
    "system.info",
    reads=True,
    description="Server version, sandbox driver kind, its capabilities and runtimes, and the warm pools' "
    "members (ready, starting).",
    result=obj(
        {
            "version": STRING,
            "driverKind": nullable(STRING),
            "capabilities": array(STRING),
            "runtimes": array(STRING),
            "embeddedWorker": BOOLEAN,
            "languages": array(STRING),
            "pool": obj({"ready": INTEGER, "starting": INTEGER}),
        }
    ),
    agent_side=True,
)
def system_info(call: Call) -> dict[str, Any]:
    return system.system_info()


@registry.method(
    "system.methods",
    reads=True,
    description="The method catalogue with JSON Schemas, limited to what the calling token may call.",
    result=array(METHOD_INFO),
    agent_side=True,
)
def system_methods(call: Call) -> list[dict[str, Any]]:
    return [method.describe() for method in registry.visible_to(call.actor)]


@registry.method(
    "system.setup_status",
    reads=True,
    description="The first-run checklist (admin token, network, proxy, image, toolbox), translated.",
    result=SETUP_STATUS,
)
def system_setup_status(call: Call) -> dict[str, Any]:
    return serialize_setup_status(setup.run_checks(), call.language)


# -- settings ----------------------------------------------------------------------------------------


@registry.method(
    "settings.get",
    reads=True,
    description="The whole settings document.",
    result=SETTINGS_SCHEMA,
    admin=True,
)
def settings_get(call: Call) -> dict[str, Any]:
    return config.get_settings()


@registry.method(
    "settings.update",
    description="Deep-merge a partial settings document; returns the whole validated document.",
    params=PATCH_SCHEMA,
    result=SETTINGS_SCHEMA,
    admin=True,
)
def settings_update(call: Call) -> dict[str, Any]:
    return config.update_settings(call.params, actor=call.actor)


@registry.method(
    "settings.reset",
    description="Reset the given dotted setting paths (or everything) to their defaults.",
    params=obj({"keys": array(string(minLength=1, maxLength=200), maxItems=100)}),
    result=SETTINGS_SCHEMA,
    admin=True,
)
def settings_reset(call: Call) -> dict[str, Any]:
    return config.reset_settings(call.params.get("keys"), actor=call.actor)


# -- secrets -----------------------------------------------------------------------------------------

SECRET_NAME = string(pattern=SECRET_NAME_PATTERN)


@registry.method(
    "secrets.list",
    reads=True,
    description="Names and timestamps of all secrets; values are never returned.",
    result=array(SECRET),
    admin=True,
)
def secrets_list(call: Call) -> list[dict[str, Any]]:
    secrets = vault.list_secrets()
    return [serialize_secret(secret, raw=config.is_raw_secret(secret.name)) for secret in secrets]


@registry.method(
    "secrets.set",
    description="Create or replace a secret. The value is encrypted at rest and never returned.",
    params=obj({"name": SECRET_NAME, "value": string(maxLength=65536)}, required=("name", "value")),
    result=SECRET,
    admin=True,
)
def secrets_set(call: Call) -> dict[str, Any]:
    secret = vault.set_secret(call.params["name"], call.params["value"], actor=call.actor)
    return serialize_secret(secret, raw=config.is_raw_secret(secret.name))


@registry.method(
    "secrets.delete",
    description="Delete a secret.",
    params=obj({"name": SECRET_NAME}, required=("name",)),
    result=EMPTY,
    admin=True,
)
def secrets_delete(call: Call) -> dict[str, Any]:
    vault.delete_secret(call.params["name"], actor=call.actor)
    return {}


# -- tokens ------------------------------------------------------------------------------------------


@registry.method(
    "tokens.list",
    reads=True,
    description="All API tokens (without their values).",
    result=array(TOKEN),
    admin=True,
)
def tokens_list(call: Call) -> list[dict[str, Any]]:
    return [serialize_token(token) for token in tokens.list_tokens()]


@registry.method(
    "tokens.create",
    description="Create a token. The plain token is in this answer only; it is never shown again. An agent "
    "token may carry ceilings: network modes, providers, a sandbox's CPUs and memory, and a budget that "
    "each sandbox, task or steering agent it makes gets its own out of (ceiling_exceeded past them).",
    params=obj(
        {
            "scope": enum(TokenScope.ADMIN, TokenScope.AGENT),  # (a person's own: tokens.create_own)
            # An agent token's project (left out: the default one).
            "project": PROJECT_ID,
            **TOKEN_FIELDS,
        },
        required=("name", "scope"),
        # An admin token is in every project, and may do anything: a project, sandboxes "own" and
        # ceilings only for an agent token.
        **{
            "if": {"properties": {"scope": {"const": TokenScope.ADMIN}}},
            "then": {"properties": {"project": False, "sandboxes": {"const": "project"}, "ceilings": False}},
        },
    ),
    result=CREATED_TOKEN,
    admin=True,
)
def tokens_create(call: Call) -> dict[str, Any]:
    return _created_token(call, call.params["scope"], call.params.get("project"))


def _created_token(call: Call, scope: str, project: str | None) -> dict[str, Any]:
    """A token made of TOKEN_FIELDS' params, with its plain value (tokens.create, projects.create_token)."""
    days = call.params.get("expiresInDays")
    token, plain = tokens.create_token(
        call.params["name"],
        scope,
        actor=call.actor,
        expires_in=timedelta(days=days) if days else None,
        project=project,
        own_sandboxes=call.params.get("sandboxes") == "own",
        ceilings=call.params.get("ceilings"),
    )
    return serialize_created_token(token, plain)


# -- projects ----------------------------------------------------------------------------------------


@registry.method(
    "projects.list",
    reads=True,
    description="The projects the caller may see: all for an admin, else its own.",
    result=array(PROJECT),
    agent_side=True,
)
def projects_list(call: Call) -> list[dict[str, Any]]:
    return [serialize_project(project) for project in tenancy.projects_of(call.actor)]


@registry.method(
    "projects.create",
    description="Create a project: it owns the sandboxes (and their agents) made by its agent tokens.",
    params=obj(
        {"id": PROJECT_ID, "name": NAME, "quotas": QUOTAS, "serverSecrets": BOOLEAN}, required=("id", "name")
    ),
    result=PROJECT,
    admin=True,
)
def projects_create(call: Call) -> dict[str, Any]:
    params = call.params
    with transaction.atomic():
        project = tenancy.create_project(
            params["id"], params["name"], params.get("quotas"), params.get("serverSecrets", False)
        )
        activity.record("project.created", {"id": project.id, "name": project.name}, actor=call.actor)
    return serialize_project(project)


@registry.method(
    "projects.members",
    reads=True,
    description="The people of a project and their roles.",
    params=obj({"project": PROJECT_ID}, required=("project",)),
    result=array(MEMBER),
    agent_side=True,
)
def projects_members(call: Call) -> list[dict[str, Any]]:
    tenancy.project_named(call.params["project"], call.actor)
    return [serialize_member(member) for member in tenancy.members(call.params["project"])]


@registry.method(
    "projects.set_member",
    description="Make a person (a Django user) a member of a project, or give them another role: owner, "
    "member, viewer, and their share of its quotas (quotas: what the sandboxes they make may take at once, "
    "and the agents in them; left out: as it was). Their open sessions end at once and open again with the "
    "new rights. For admins and the project's owners.",
    params=obj(
        {"project": PROJECT_ID, "user": NAME, "role": enum(*Role.values), "quotas": SHARE_QUOTAS},
        required=("project", "user", "role"),
    ),
    result=MEMBER,
    agent_side=True,
)
def projects_set_member(call: Call) -> dict[str, Any]:
    params = call.params
    tenancy.check_manages(call.actor, params["project"])
    with transaction.atomic():
        member = tenancy.set_member(params["project"], params["user"], params["role"], params.get("quotas"))
        activity.record("project.member_set", params, actor=call.actor)
    return serialize_member(member)


@registry.method(
    "projects.invite",
    description="A one-time link that makes whoever opens it (logging in, or signing up where password login "
    "is on) a member of the project in role; valid for expiresInHours (default 72). The link is in this "
    "answer only. For admins and the project's owners.",
    params=obj(
        {
            "project": PROJECT_ID,
            "role": enum(*Role.values),
            "expiresInHours": integer(minimum=1, maximum=24 * 30),
        },
        required=("project", "role"),
    ),
    result=CREATED_INVITE,
)
def projects_invite(call: Call) -> dict[str, Any]:
    params = call.params
    tenancy.check_manages(call.actor, params["project"])
    hours = params.get("expiresInHours", invites.DEFAULT_HOURS)
    invite, url = invites.create_invite(params["project"], params["role"], actor=call.actor, hours=hours)
    return serialize_invite(invite) | {"url": url}


@registry.method(
    "projects.invites",
    reads=True,
    description="A project's invitations not used yet and not expired (without their links).",
    params=obj({"project": PROJECT_ID}, required=("project",)),
    result=array(INVITE),
)
def projects_invites(call: Call) -> list[dict[str, Any]]:
    tenancy.check_manages(call.actor, call.params["project"])
    return [serialize_invite(invite) for invite in invites.open_invites(call.params["project"])]


@registry.method(
    "projects.revoke_invite",
    description="Revoke an invitation not used yet: its link opens nothing any more.",
    params=obj({"project": PROJECT_ID, "inviteId": ID}, required=("project", "inviteId")),
    result=EMPTY,
)
def projects_revoke_invite(call: Call) -> dict[str, Any]:
    tenancy.check_manages(call.actor, call.params["project"])
    invites.revoke_invite(call.params["project"], call.params["inviteId"])
    return {}


@registry.method(
    "projects.tokens",
    reads=True,
    description="A project's own tokens (its agent tokens, steering agents' among them; a person's own are "
    "theirs), without their values. For admins and the project's owners.",
    params=obj({"project": PROJECT_ID}, required=("project",)),
    result=array(TOKEN),
)
def projects_tokens(call: Call) -> list[dict[str, Any]]:
    tenancy.check_manages(call.actor, call.params["project"])
    return [serialize_token(token) for token in tokens.project_tokens(call.params["project"])]


@registry.method(
    "projects.create_token",
    description="Create an agent token of a project (for a CI job, a bot, a steering agent outside cocoon): "
    "it acts in that project alone, on all its sandboxes or only those it makes, within its ceilings. The "
    "plain token is in this answer only. For admins and the project's owners.",
    params=obj({"project": PROJECT_ID, **TOKEN_FIELDS}, required=("project", "name")),
    result=CREATED_TOKEN,
)
def projects_create_token(call: Call) -> dict[str, Any]:
    tenancy.check_manages(call.actor, call.params["project"])
    return _created_token(call, TokenScope.AGENT, call.params["project"])


@registry.method(
    "projects.revoke_token",
    description="Revoke one of a project's own tokens (and the steering agents' tokens made below it); it "
    "stops working at once. For admins and the project's owners.",
    params=obj({"project": PROJECT_ID, "tokenId": ID}, required=("project", "tokenId")),
    result=EMPTY,
)
def projects_revoke_token(call: Call) -> dict[str, Any]:
    tenancy.check_manages(call.actor, call.params["project"])
    tokens.revoke_token(call.params["tokenId"], actor=call.actor, project=call.params["project"])
    return {}


@registry.method(
    "projects.secrets",
    reads=True,
    description="The names of a project's own secrets (values are never returned). For its sandboxes they "
    "stand before the server's of the same name; the server's are used only where an admin lets the "
    "project (serverSecrets). For admins and the project's owners.",
    params=obj({"project": PROJECT_ID}, required=("project",)),
    result=array(SECRET),
)
def projects_secrets(call: Call) -> list[dict[str, Any]]:
    tenancy.check_manages(call.actor, call.params["project"])
    return [serialize_secret(each, raw=False) for each in vault.list_secrets(call.params["project"])]


@registry.method(
    "projects.set_secret",
    description="Create or replace a project's own secret (its ANTHROPIC_API_KEY, GITHUB_TOKEN, a "
    "provider's key): encrypted at rest, never returned, used for the project's sandboxes only. For admins "
    "and the project's owners.",
    params=obj(
        {"project": PROJECT_ID, "name": SECRET_NAME, "value": string(maxLength=65536)},
        required=("project", "name", "value"),
    ),
    result=SECRET,
)
def projects_set_secret(call: Call) -> dict[str, Any]:
    params = call.params
    tenancy.check_manages(call.actor, params["project"])
    secret = vault.set_secret(params["name"], params["value"], actor=call.actor, project=params["project"])
    return serialize_secret(secret, raw=False)


@registry.method(
    "projects.delete_secret",
    description="Delete a project's own secret: its sandboxes get the server's of that name again where "
    "the project may use them, else none. For admins and the project's owners.",
    params=obj({"project": PROJECT_ID, "name": SECRET_NAME}, required=("project", "name")),
    result=EMPTY,
)
def projects_delete_secret(call: Call) -> dict[str, Any]:
    tenancy.check_manages(call.actor, call.params["project"])
    vault.delete_secret(call.params["name"], actor=call.actor, project=call.params["project"])
    return {}


@registry.method(
    "projects.remove_member",
    description="Take a person out of a project; their open sessions end at once. For admins and owners.",
    params=obj({"project": PROJECT_ID, "user": NAME}, required=("project", "user")),
    result=EMPTY,
    agent_side=True,
)
def projects_remove_member(call: Call) -> dict[str, Any]:
    params = call.params
    tenancy.check_manages(call.actor, params["project"])
    with transaction.atomic():
        tenancy.remove_member(params["project"], params["user"])
        activity.record("project.member_removed", params, actor=call.actor)
    return {}


@registry.method(
    "projects.update",
    description="Rename a project or set its quotas (the whole set: a quota left out has no limit). Past a "
    "quota a create, start or spawn answers quota_exceeded; what runs already is left running.",
    params=obj(
        {"id": PROJECT_ID, "name": NAME, "quotas": QUOTAS, "serverSecrets": BOOLEAN}, required=("id",)
    ),
    result=PROJECT,
    admin=True,
)
def projects_update(call: Call) -> dict[str, Any]:
    params = call.params
    with transaction.atomic():
        project = tenancy.update_project(
            params["id"],
            name=params.get("name"),
            quotas=params.get("quotas"),
            server_secrets=params.get("serverSecrets"),
        )
        activity.record("project.updated", {"id": project.id, "name": project.name}, actor=call.actor)
    return serialize_project(project)


@registry.method(
    "tokens.revoke",
    description="Revoke a token; it stops working at once.",
    params=obj({"tokenId": ID}, required=("tokenId",)),
    result=EMPTY,
    admin=True,
)
def tokens_revoke(call: Call) -> dict[str, Any]:
    tokens.revoke_token(call.params["tokenId"], actor=call.actor)
    return {}


def _person(call: Call) -> Any:
    """The person (Django user) calling, for their own tokens; forbidden for a token that is nobody's."""
    if call.actor.user is None:
        raise Forbidden(_("Only a person (logged in with a user name) has tokens of their own."))
    return get_user_model().objects.get(pk=call.actor.user)


@registry.method(
    "tokens.mine",
    reads=True,
    description="The calling person's own tokens (user scope), without their values.",
    result=array(TOKEN),
)
def tokens_mine(call: Call) -> list[dict[str, Any]]:
    person = _person(call)
    return [serialize_token(token) for token in tokens.list_tokens() if token.user_id == person.pk]


@registry.method(
    "tokens.create_own",
    description="Create a token of the calling person's own, for their scripts: it acts as they do at each "
    "call (their role, in the project their session works in), and stops once they are deactivated. The "
    "plain token is in this answer only.",
    params=obj(
        {"name": NAME, "expiresInDays": integer(minimum=1, maximum=MAX_TOKEN_DAYS)}, required=("name",)
    ),
    result=CREATED_TOKEN,
)
def tokens_create_own(call: Call) -> dict[str, Any]:
    person, days = _person(call), call.params.get("expiresInDays")
    token, plain = tokens.create_token(
        call.params["name"],
        TokenScope.USER,
        actor=call.actor,
        expires_in=timedelta(days=days) if days else None,
        project=call.actor.project or None,  # (a superuser's: none, every project)
        user=person,
    )
    return serialize_created_token(token, plain)


@registry.method(
    "tokens.revoke_own",
    description="Revoke one of the calling person's own tokens; it stops working at once.",
    params=obj({"tokenId": ID}, required=("tokenId",)),
    result=EMPTY,
)
def tokens_revoke_own(call: Call) -> dict[str, Any]:
    _person(call)
    tokens.revoke_token(call.params["tokenId"], actor=call.actor, own=True)
    return {}


# -- activity ----------------------------------------------------------------------------------------


@registry.method(
    "activity.list",
    reads=True,
    description="The activity log, newest first, rendered in the caller's language.",
    params=obj(
        {
            "limit": integer(minimum=1, maximum=500),
            "before": integer(minimum=1),
            "sandboxId": ID,
            "agentId": ID,
        }
    ),
    result=array(ACTIVITY_ENTRY),
    agent_side=True,
)
def activity_list(call: Call) -> list[dict[str, Any]]:
    entries = activity.list_entries(
        call.actor,
        limit=call.params.get("limit", 50),
        before=call.params.get("before"),
        sandbox_id=call.params.get("sandboxId", ""),
        agent_id=call.params.get("agentId", ""),
    )
    return [
        serialize_activity_entry(entry) | {"message": activity.render(entry.key, entry.params, call.language)}
        for entry in entries
    ]


@registry.method(
    "activity.prune",
    description="Queue removal of activity entries older than olderThanDays (default: the retention).",
    params=obj({"olderThanDays": integer(minimum=0, maximum=3650)}),
    result=obj({"queued": BOOLEAN}),
    admin=True,
)
def activity_prune(call: Call) -> dict[str, Any]:
    days = call.params.get("olderThanDays")
    transaction.on_commit(lambda: prune_activity.delay(days))
    return {"queued": True}


# -- events (WebSocket only: a subscription lives on its connection) --------------------------------


@registry.method(
    "events.subscribe",
    reads=True,
    description="Subscribe this WebSocket to events, optionally filtered by types, sandboxId, agentId. "
    'Events then arrive as {"subscription", "event"} frames.',
    params=SUBSCRIPTION_FILTER,
    result=obj({"subscription": STRING}),
    ws_only=True,
)
def events_subscribe(call: Call) -> dict[str, Any]:
    return {"subscription": call.connection.add_subscription(call.params)}


@registry.method(
    "events.unsubscribe",
    reads=True,
    description="End a subscription of this WebSocket.",
    params=obj({"subscription": STRING}, required=("subscription",)),
    result=EMPTY,
    ws_only=True,
)
def events_unsubscribe(call: Call) -> dict[str, Any]:
    call.connection.remove_subscription(call.params["subscription"])
    return {}
