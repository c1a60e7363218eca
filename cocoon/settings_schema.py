"""The settings document's JSON Schema: what a whole document and a partial update (a patch) may hold,
and the patterns other apps check names against."""

from typing import Any

from cocoon.choices import AttentionKind, ChannelType, NetworkMode, ProviderKind
from cocoon.schema import BOOLEAN, Schema, array, enum, integer, obj, string

PROVIDER_AUTH = ("bearer", "x-api-key", "header", "none")
# A provider's id: its key in settings.providers and its path on the credential proxy (/p-<id>/).
PROVIDER_ID_PATTERN = "^[a-z0-9][a-z0-9-]{0,31}$"
SECRET_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_]{0,63}$"
# An npm package spec: name or @scope/name, optionally @version or @tag. Never a path, URL or option.
NPM_SPEC_PATTERN = r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*(@[A-Za-z0-9._^~<>=| -]+)?$"
PRICE_FIELDS = ("input", "output", "cacheWrite", "cacheRead")
PER_MILLION = {"type": "number", "minimum": 0, "maximum": 1_000_000}


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
CIDR = string(pattern=r"^[0-9.]+(/[0-9]{1,2})?$", maxLength=18)  # an IPv4 network; settings_checks parses it
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
                "openAllowCidrs": array(CIDR, maxItems=100),
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
        "tasks": obj(
            {"keepFailedSandboxHours": integer(minimum=0, maximum=8760)}, required=("keepFailedSandboxHours",)
        ),
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
        "general", "sandbox", "egress", "providers", "secrets", "security", "agents", "tasks", "git",
        "toolbox", "notifications", "usage",
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
