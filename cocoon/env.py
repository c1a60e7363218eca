"""Typed helpers for reading cocoon's environment (all variables are prefixed COCOON_)."""

import os
from pathlib import Path


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str) -> list[str]:
    """A comma-separated variable, without blanks."""
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def env_path(name: str, default: Path) -> Path:
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser().resolve() if value else default.resolve()


def parse_bind(value: str) -> tuple[str, int]:
    """Split COCOON_BIND ("host:port", "[::1]:port") into host and port."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"COCOON_BIND must look like HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)
