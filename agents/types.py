"""What agent services return and serializers render: an agent's screen and why it has its status."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agents.models import Agent


@dataclass(frozen=True)
class Screen:
    """An agent's screen: live, or the last one cocoon kept of an agent that is gone (last_known)."""

    screen: str
    last_known: bool
    scrollback: str | None = None  # None when none was asked for
    captured_at: datetime | None = None


@dataclass(frozen=True)
class HookSeen:
    """The last report of the agent's own hook: its status, how old it is, whether it still counts."""

    status: str
    age_s: float
    counts: bool


@dataclass(frozen=True)
class Explanation:
    """Why an agent has its status: the agent (its rule and what the last poll saw) and the ages."""

    agent: Agent
    summary: Any  # lazy translation
    hook: HookSeen | None
    screen_quiet_s: float
    start_up_grace_s: float
