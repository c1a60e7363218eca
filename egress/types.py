"""egress's value types: the proxy's status, a remote node's proxy, a provider as listed and what
providers.test found. Made by container, remote and providers; serialized by egress.schemas."""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProxyStatus:
    running: bool
    image: str
    address: str | None
    policy_version: int | None
    acknowledged_version: int | None
    # Why the proxy refused the current policy (it keeps serving the last one it could use).
    policy_error: str | None


@dataclass(frozen=True)
class NodeProxyStatus:
    """A remote node's egress proxy as egress.status shows it (its ack as last taken, at most a tick old)."""

    node_id: str
    name: str
    running: bool
    policy_version: int | None
    acknowledged_version: int | None
    policy_error: str | None


@dataclass(frozen=True)
class Provider:
    """A provider as listed: its entry (BUILTIN's or settings.providers'), whether it is a built-in one
    left as it is, and whether its secret is set."""

    id: str
    entry: dict[str, Any]
    builtin: bool
    secret_set: bool


@dataclass(frozen=True)
class ProviderCheck:
    """What providers.test found: result is ok, unreachable, unauthorized or error; message is a lazy
    translation."""

    result: str
    message: Any
    status: int | None = None
    models: list[str] = field(default_factory=list)
