"""What this server is and runs on (system.info). The apps add their part (sandboxes: the engine) with
register_info in their ready(), as they register checklist items."""

from collections.abc import Callable
from typing import Any

from django.conf import settings

import cocoon

_parts: list[Callable[[], dict[str, Any]]] = []


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
