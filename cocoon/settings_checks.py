"""Validation of the settings document: its schema, and what a schema cannot say (limits within their
maxima, pools of distinct templates, hosts the egress proxy can dial, complete channels)."""

import ipaddress
import json
import re
import ssl
from typing import Any
from urllib.parse import urlsplit

from django.utils.translation import gettext_lazy as _

from cocoon.choices import ChannelType
from cocoon.errors import field, fields_error, interpolate_lazy
from cocoon.schema import compile_schema, validate, zone
from cocoon.settings_schema import (
    LOCAL_NODE_NAME,
    NAME_PATTERN,
    PATCH_SCHEMA,
    POOL_TEMPLATE_FIELDS,
    SETTINGS_SCHEMA,
)

_document_validator = compile_schema(SETTINGS_SCHEMA)
_patch_validator = compile_schema(PATCH_SCHEMA)


def check_limits(limits: dict[str, Any], maxima: dict[str, Any], path: str) -> None:
    """Raises invalid_params naming each of limits above its maximum; path is where limits sit."""
    fields = [
        field(
            f"{path}.{name}",
            interpolate_lazy(_("Must be at most %(limit)s."), {"limit": maxima[name]}),
            "maximum",
        )
        for name, value in limits.items()
        if value > maxima[name]
    ]
    if fields:
        raise fields_error(fields)


def _check_limits(document: dict[str, Any]) -> None:
    sandbox = document["sandbox"]
    check_limits(sandbox["limits"], sandbox["maxLimits"], "sandbox.limits")
    for index, pool in enumerate(sandbox.get("pools", [])):
        check_limits(
            sandbox["limits"] | pool.get("limits", {}), sandbox["maxLimits"], f"sandbox.pools.{index}.limits"
        )


def _check_pools(document: dict[str, Any]) -> None:
    """Two pools of the same template would be one pool of both sizes, split for no reason: refused."""
    sandbox = document["sandbox"]
    seen: dict[str, int] = {}
    fields = []
    for index, pool in enumerate(sandbox.get("pools", [])):
        template = {name: pool.get(name, sandbox.get(name, "")) for name in POOL_TEMPLATE_FIELDS}
        template["limits"] = sandbox["limits"] | pool.get("limits", {})
        template["node"] = pool.get("node", LOCAL_NODE_NAME)
        key = json.dumps(template, sort_keys=True)
        if key in seen:
            message = interpolate_lazy(_("Has the same options as pool %(other)s."), {"other": seen[key]})
            fields.append(field(f"sandbox.pools.{index}", message, "duplicate_pool"))
        seen.setdefault(key, index)
    if fields:
        raise fields_error(fields)


def _check_open_allow(document: dict[str, Any]) -> None:
    """Each of sandbox.openAllowCidrs a network, written as one (no host bits set: 10.0.5.0/24)."""
    fields = []
    for index, cidr in enumerate(document["sandbox"].get("openAllowCidrs", [])):
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError:
            message = interpolate_lazy(_("%(cidr)s is no IPv4 network (like 10.0.5.0/24)."), {"cidr": cidr})
            fields.append(field(f"sandbox.openAllowCidrs.{index}", message, "invalid_cidr"))
    if fields:
        raise fields_error(fields)


def _check_consumable(document: dict[str, Any]) -> None:
    """What the schema cannot say but the egress proxy needs: a provider's base URL names a host it
    can dial, and the CA bundle is one. A value it could not use would make it refuse the policy."""
    fields = [
        field(f"providers.{name}.baseUrl", _("Has an invalid format."))
        for name, provider in document["providers"].items()
        if not dialable(provider["baseUrl"])
    ]
    if bundle := document["egress"].get("caBundle"):
        try:
            ssl.create_default_context().load_verify_locations(cadata=bundle)
        except (ssl.SSLError, ValueError):
            message = _("Is not a bundle of PEM certificates.")
            fields.append(field("egress.caBundle", message))
    if fields:
        raise fields_error(fields)


def dialable(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port out of range
    except ValueError:
        return False
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return re.fullmatch(NAME_PATTERN, host) is not None


def _check_channels(document: dict[str, Any]) -> None:
    """A channel needs its URL (and a webhook its secret) in the vault, and quiet hours a known zone."""
    fields = []
    for name, channel in document["notifications"]["channels"].items():
        path = f"notifications.channels.{name}"
        if not channel.get("urlPreview"):
            fields.append(field(f"{path}.url", _("A channel needs a URL."), "required"))
        if channel["type"] == ChannelType.WEBHOOK and not channel.get("secretSet"):
            fields.append(field(f"{path}.secret", _("A signed webhook needs a secret."), "required"))
        if quiet := channel.get("quietHours"):
            zone(quiet["timezone"], f"{path}.quietHours.timezone")
    if fields:
        raise fields_error(fields)


def validate_document(document: dict[str, Any]) -> None:
    validate(_document_validator, document)
    _check_limits(document)
    _check_pools(document)
    _check_open_allow(document)
    _check_consumable(document)
    _check_channels(document)


def validate_patch(patch: dict[str, Any]) -> None:
    validate(_patch_validator, patch)
