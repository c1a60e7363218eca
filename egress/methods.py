"""RPC methods of egress control and providers."""

from typing import Any

from django.utils.translation import gettext_lazy as _

from cocoon import settings_schema
from cocoon.errors import InvalidParams, NotFound, field_error
from cocoon.registry import Call, registry
from cocoon.schema import STRING, array, integer, nullable, obj, string
from cocoon.settings_checks import dialable
from egress import fence, providers, remote, services
from egress.container import proxy_status
from egress.models import Fence
from egress.schemas import (
    DENIED,
    EGRESS_STATUS,
    FENCE,
    PROVIDER,
    PROVIDER_CHECK,
    serialize_denied,
    serialize_egress_status,
    serialize_fence,
    serialize_provider,
    serialize_provider_check,
)
from sandboxes.schemas import SANDBOX_ID

PROVIDER_ID = string(pattern=settings_schema.PROVIDER_ID_PATTERN)


@registry.method(
    "egress.status",
    reads=True,
    description="The egress proxy: whether it runs, its policy version and the version it has loaded, "
    "and whether this driver enforces egress at all; nodes: the same of each remote node's own proxy.",
    params=obj({}),
    result=EGRESS_STATUS,
    admin=True,
)
def egress_status(call: Call) -> dict[str, Any]:
    return serialize_egress_status(proxy_status() if services.enforced() else None, remote.statuses())


@registry.method(
    "egress.start_proxy",
    description="Build the egress proxy's image if needed and start (or replace) its container; answers "
    "egress.status. The setup checklist's fix for a proxy that is down.",
    params=obj({}),
    result=EGRESS_STATUS,
    admin=True,
)
def egress_start_proxy(call: Call) -> dict[str, Any]:
    services.start_proxy()
    return egress_status(call)


@registry.method(
    "egress.set_fence",
    description="Set the open sandboxes' fence (no host, no private networks) on every node that answers "
    "again. The setup checklist's fix for a fence not in force.",
    params=obj({}),
    result=array(FENCE),
    admin=True,
)
def egress_set_fence(call: Call) -> list[dict[str, Any]]:
    fence.set_everywhere()
    return [serialize_fence(row) for row in Fence.objects.order_by("node")]


@registry.method(
    "egress.denied",
    reads=True,
    description="Recent attempts the egress proxy refused (per sandbox, host, port and reason, counted).",
    params=obj({"sandboxId": SANDBOX_ID, "limit": integer(minimum=1, maximum=1000)}),
    result=array(DENIED),
    admin=True,
)
def egress_denied(call: Call) -> list[dict[str, Any]]:
    rows = services.list_denied(call.params.get("sandboxId"), call.params.get("limit", 100))
    return [serialize_denied(row) for row in rows]


@registry.method(
    "egress.allow",
    description="Allow a host (the one-click allow of a denied attempt): for every sandbox, or only for "
    "sandboxId. Takes effect at once, without restarting anything.",
    params=obj(
        {"host": settings_schema.HOST, "sandboxId": SANDBOX_ID},
        required=("host",),
    ),
    result=obj({"host": STRING, "sandboxId": nullable(STRING), "allowlist": array(STRING)}),
    admin=True,
)
def egress_allow(call: Call) -> dict[str, Any]:
    host, sandbox_id = call.params["host"].lower().rstrip("."), call.params.get("sandboxId")
    allowlist = services.allow(host, actor=call.actor, sandbox_id=sandbox_id)
    return {"host": host, "sandboxId": sandbox_id, "allowlist": allowlist}


@registry.method(
    "providers.list",
    reads=True,
    description="Model providers: the built-in anthropic and openai plus settings.providers, and whether "
    "each one's secret is set (never the value).",
    params=obj({}),
    result=array(PROVIDER),
    admin=True,
)
def providers_list(call: Call) -> list[dict[str, Any]]:
    return [serialize_provider(provider) for provider in providers.list_providers()]


@registry.method(
    "providers.test",
    description="Check a provider from the server: reachability, auth and its model list. Give providerId "
    "for a saved one, or provider (and key) for input not saved yet.",
    params=obj(
        {"providerId": PROVIDER_ID, "provider": settings_schema.PROVIDER, "key": string(maxLength=10_000)},
        anyOf=[{"required": ["providerId"]}, {"required": ["provider"]}],
    ),
    result=PROVIDER_CHECK,
    admin=True,
)
def providers_test(call: Call) -> dict[str, Any]:
    params = call.params
    if "provider" in params:
        provider = params["provider"]
        # As settings.update would check it: a URL no HTTP client can read is the caller's to fix.
        if not dialable(provider["baseUrl"]):
            raise field_error("provider.baseUrl", _("Has an invalid format."))
    elif "providerId" in params:
        provider = providers.all_providers().get(params["providerId"])
        if provider is None:
            raise NotFound(_("There is no provider %(id)s."), id=params["providerId"])
    else:
        raise InvalidParams(_("Give providerId or provider."))
    check = providers.check_provider(provider, params.get("key"))
    return serialize_provider_check(check, call.language)
