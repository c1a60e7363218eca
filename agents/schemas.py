"""The wire shapes of agents and profiles: their JSON Schemas and the dicts that match them, side by side."""

from typing import Any

from django.utils import translation

from agents.choices import AgentStatus, ExitReason, PromptMode, StatusRule, StatusSource
from agents.models import Agent, AgentProfile
from agents.profiles import FIELDS
from agents.tmux import KEYS
from agents.types import Explanation, Screen
from cocoon.schema import (
    BOOLEAN,
    BUDGET,
    ENV,
    INTEGER,
    STRING,
    TIMESTAMP,
    array,
    enum,
    nullable,
    obj,
    string,
    timestamp,
)
from cocoon.schemas import CEILINGS
from cocoon.settings_schema import SECRET_NAME_PATTERN

NUMBER = {"type": "number"}
AGENT_ID = string(pattern="^ag_[a-z0-9]+$", maxLength=40)
# Printable, not blank at either end (it is shown wherever the agent is).
AGENT_NAME = string(maxLength=80, pattern="^[^\\x00-\\x20\\x7f]([^\\x00-\\x1f\\x7f]*[^\\x00-\\x20\\x7f])?$")
AGENT = obj(
    {
        "id": STRING,
        "sandboxId": STRING,
        "name": STRING,
        "profile": STRING,
        "status": enum(*AgentStatus.values),
        "statusSource": enum(*StatusSource.values),
        "statusSince": TIMESTAMP,
        "rule": enum(*StatusRule.values),  # which rule decided the status (agent.explain says more)
        # Why an `error` (null otherwise): an ErrorReason, or the CLI hook's own word (rate_limit, ...).
        "statusReason": nullable(STRING),
        "screenTail": STRING,  # the last lines of the last screen seen (up to 5, each cut to 200)
        "exitCode": nullable(INTEGER),
        "exitReason": nullable(enum(*ExitReason.values)),
        "cliSessionId": nullable(STRING),  # the CLI's own session (what a resume picks up), once known
        "taskId": nullable(STRING),  # the task it works for (a step of its workflow), if any
        "budget": nullable(BUDGET),
        "steering": nullable(CEILINGS),  # a steering agent's token's ceilings (agent.spawn {steering})
        "createdAt": TIMESTAMP,
        "lastActivityAt": TIMESTAMP,
    }
)
AGENT_BY_ID = obj({"agentId": AGENT_ID}, required=("agentId",))
SCREEN = obj(
    {"screen": STRING, "scrollback": STRING, "lastKnown": BOOLEAN, "capturedAt": nullable(TIMESTAMP)}
)
EXPLANATION = obj(
    {
        "agent": AGENT,
        "rule": enum(*StatusRule.values),
        "detail": STRING,
        "summary": STRING,
        "hook": nullable(obj({"status": STRING, "ageS": NUMBER, "counts": BOOLEAN})),
        "screenQuietS": NUMBER,
        "workingIndicator": BOOLEAN,
        "question": STRING,
        "foreground": STRING,
        "startUpGraceS": NUMBER,
        "lastInputAt": nullable(TIMESTAMP),
    }
)
PROFILE_NAME = string(pattern="^[a-z0-9][a-z0-9-]{0,63}$")
# What a profile says (the keys of agents.profiles.FIELDS); patterns are regular expressions (checked to
# compile on save).
PROFILE_FIELDS = {
    "command": array(string(minLength=1, maxLength=4000), minItems=1, maxItems=100),
    "promptMode": enum(*PromptMode.values),
    "env": ENV,
    "secrets": array(string(pattern=SECRET_NAME_PATTERN), maxItems=50),
    "hooks": BOOLEAN,
    "workingPattern": string(maxLength=200),
    "blockedPatterns": array(string(minLength=1, maxLength=500), maxItems=50),
    "defaultModel": string(maxLength=200),
    "resumeCommand": array(string(minLength=1, maxLength=4000), maxItems=100),
    # {sessionId} in an argument stands for the CLI's session id (agent.cliSessionId).
    "resumeSessionCommand": array(string(minLength=1, maxLength=4000), maxItems=100),
    # The answer page's buttons for a blocked agent: each a list of keys sent one after another.
    "answers": array(array(enum(*sorted(KEYS)), minItems=1, maxItems=10), maxItems=20),
}
PROFILE = obj({"name": STRING, **PROFILE_FIELDS, "builtin": BOOLEAN})
PROFILE_BY_NAME = obj({"name": PROFILE_NAME}, required=("name",))


TAIL_LINES, TAIL_LINE_MAX = 5, 200


def screen_tail(screen: str, lines: int = TAIL_LINES) -> str:
    """The bottom of a screen (an agent card's, an attention item's): its last non-empty lines, bounded."""
    kept = [line[:TAIL_LINE_MAX].rstrip() for line in screen.split("\n") if line.strip()]
    return "\n".join(kept[-lines:])


def serialize_agent(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "sandboxId": agent.sandbox_id,
        "name": agent.name,
        "profile": agent.profile,
        "status": agent.status,
        "statusSource": agent.status_source,
        "statusSince": agent.status_at.isoformat(),
        "rule": agent.rule,
        "statusReason": (agent.status_reason or None) if agent.status == AgentStatus.ERROR else None,
        "screenTail": screen_tail(agent.last_screen),
        "exitCode": agent.exit_code,
        "exitReason": agent.exit_reason or None,
        "cliSessionId": agent.cli_session_id or None,
        "taskId": agent.task_id or None,
        "budget": agent.budget,
        "steering": agent.steering["ceilings"] if agent.steering is not None else None,
        "createdAt": agent.created_at.isoformat(),
        "lastActivityAt": agent.last_activity_at.isoformat(),
    }


def serialize_screen(screen: Screen) -> dict[str, Any]:
    """A live screen has no capturedAt; scrollback is there only when it was asked for."""
    result: dict[str, Any] = {"screen": screen.screen, "lastKnown": screen.last_known}
    if screen.last_known:
        result["capturedAt"] = timestamp(screen.captured_at)
    if screen.scrollback is not None:
        result["scrollback"] = screen.scrollback
    return result


def serialize_explanation(explanation: Explanation, language: str) -> dict[str, Any]:
    hook = explanation.hook
    with translation.override(language):
        summary = str(explanation.summary)
    return {
        "agent": serialize_agent(explanation.agent),
        "rule": explanation.agent.rule,
        "detail": explanation.agent.rule_detail,
        "summary": summary,
        "hook": None if hook is None else {"status": hook.status, "ageS": hook.age_s, "counts": hook.counts},
        "screenQuietS": explanation.screen_quiet_s,
        "workingIndicator": explanation.agent.screen_indicator,
        "question": explanation.agent.screen_question,
        "foreground": explanation.agent.foreground,
        "startUpGraceS": explanation.start_up_grace_s,
        "lastInputAt": timestamp(explanation.agent.last_input_at),
    }


def serialize_profile(profile: AgentProfile) -> dict[str, Any]:
    document = {wire: getattr(profile, field) for wire, field in FIELDS.items()}
    return {"name": profile.name, **document, "builtin": profile.builtin}
