"""What this server is and runs on (system.info). The apps add their part (sandboxes: the engine) with
register_info in their ready(), as they register checklist items."""

from collections.abc import Callable
from typing import Any

from django.conf import settings

import cocoon

_parts: list[Callable[[], dict[str, Any]]] = []


def public_url() -> str:
    """Where people and steering agents reach cocoond: COCOON_URL, else the address it binds to."""
    if settings.COCOON_URL:
        return settings.COCOON_URL
    host, _sep, port = settings.COCOON_BIND.rpartition(":")
    host = "127.0.0.1" if host in {"0.0.0.0", "[::]", ""} else host  # noqa: S104 - a comparison
    return f"http://{host}:{port}"


def register_info(part: Callable[[], dict[str, Any]]) -> None:
    _parts.append(part)


def system_info() -> dict[str, Any]:
    info: dict[str, Any] = {"version": cocoon.__version__}
    for part in _parts:
        info |= part()
    return info | {
        "embeddedWorker": settings.CELERY_EMBEDDED,
        "languages": [code for code, _name in settings.LANGUAGES],
    }
