"""What the setup checklist holds and serializers render: a check and its result."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SetupCheck:
    key: str
    title: Any  # lazy translation
    check: Callable[[], tuple[bool, Any]]  # -> (ok, detail as lazy translation or "")
    fix: str | None = None  # the method that repairs it (offered by the UI as a button)
    # Whether fix repairs it as things are (None: always); else the detail says what will.
    fixable: Callable[[], bool] | None = None


@dataclass(frozen=True)
class CheckResult:
    check: SetupCheck
    ok: bool
    detail: Any  # lazy translation or ""
    fix: str | None = None  # the check's fix, when it is not ok and the fix would repair it
