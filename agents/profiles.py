"""Agent profiles: the built-ins (editable, resettable to their definition here) and custom ones."""

from typing import Any

import regex
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from agents.choices import AgentStatus, PromptMode
from agents.models import Agent, AgentProfile
from agents.status import ScreenRules
from cocoon import activity
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import Conflict, field, fields_error, interpolate_lazy
from cocoon.lookup import get_or_not_found

# Screen patterns are regular expressions, searched in the last lines of the screen (agents.status).
BUILTIN_PROFILES: dict[str, dict[str, Any]] = {
    # A y/n question at the bottom of the screen (read -p "Continue? [y/n] ") waits for a human.
    "shell": {
        "command": ["bash", "-l"],
        "prompt_mode": PromptMode.TYPED,
        "blocked_patterns": [r"\? *[\[(][yY]/[nN][\])] *$"],
        "answers": [["y", "Enter"], ["n", "Enter"], ["Enter"], ["C-c"]],
    },
    "claude-code": {
        "command": ["claude"],
        "resume_command": ["claude", "--continue"],
        "resume_session_command": ["claude", "--resume", "{sessionId}"],
        "prompt_mode": PromptMode.ARGUMENT,
        "env": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"},
        "secrets": ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"],
        "hooks": True,
        "working_pattern": r"(?i)esc to interrupt",
        # Its dialogs take the number of an option, Enter for the one selected, Escape to cancel.
        "answers": [["1"], ["2"], ["3"], ["Enter"], ["Escape"]],
        # Claude Code's permission dialogs (2.1): Bash, edits, new files, web fetches, connections; and
        # the footer of its questions to the user (AskUserQuestion).
        "blocked_patterns": [
            r"Do you want to (proceed|make this edit|create|allow|use this API key)\b.*\?",
            r"Enter to select · .*Esc to cancel",
        ],
    },
    "codex": {
        "command": ["codex"],
        "resume_command": ["codex", "resume", "--last"],
        "resume_session_command": ["codex", "resume", "{sessionId}"],
        "prompt_mode": PromptMode.ARGUMENT,
        "secrets": ["OPENAI_API_KEY"],
        "hooks": True,
        "working_pattern": r"(?i)esc to interrupt",
        # Codex's approval overlays (0.171): commands, edits, extra permissions, terminal input.
        "blocked_patterns": [
            r"Would you like to (run the following command|make the following edits|grant these permissions"
            r"|send input to)",
        ],
    },
}
# Wire name -> model field of what a profile says.
FIELDS = {
    "command": "command",
    "promptMode": "prompt_mode",
    "env": "env",
    "secrets": "secrets",
    "hooks": "hooks",
    "workingPattern": "working_pattern",
    "blockedPatterns": "blocked_patterns",
    "defaultModel": "default_model",
    "resumeCommand": "resume_command",
    "resumeSessionCommand": "resume_session_command",
    "answers": "answers",
}
SESSION_PLACEHOLDER = "{sessionId}"

activity.register_messages(
    {
        "profile.created": _("Agent profile %(name)s was created."),
        "profile.updated": _("Agent profile %(name)s was changed (%(keys)s)."),
        "profile.reset": _("Agent profile %(name)s was reset to its built-in definition."),
        "profile.deleted": _("Agent profile %(name)s was deleted."),
    },
    visibility=Visibility.AGENT,
)


def ensure_profiles() -> None:
    for name, fields in BUILTIN_PROFILES.items():
        AgentProfile.objects.get_or_create(name=name, defaults={**fields, "builtin": True})


def list_profiles() -> list[AgentProfile]:
    ensure_profiles()
    return list(AgentProfile.objects.order_by("name"))


def get_profile(name: str) -> AgentProfile:
    ensure_profiles()
    return get_or_not_found(AgentProfile, name, _("There is no agent profile %(name)s."), name=name)


def resume_command(profile: AgentProfile, cli_session_id: str) -> list[str]:
    """The argv that resumes an agent of this profile: exactly its CLI session when its hooks named one
    and the profile says how, else the profile's resume command (empty: it cannot resume)."""
    if cli_session_id and profile.resume_session_command:
        return [part.replace(SESSION_PLACEHOLDER, cli_session_id) for part in profile.resume_session_command]
    return list(profile.resume_command)


def screen_rules(profile: AgentProfile) -> ScreenRules:
    return ScreenRules.of(profile.command, profile.hooks, profile.working_pattern, profile.blocked_patterns)


def _check_patterns(fields: dict[str, Any]) -> None:
    """Screen patterns must compile, with the poller's engine (regex in `re` syntax): a broken one would
    otherwise never match."""
    patterns = []
    if fields.get("workingPattern"):
        patterns.append(("workingPattern", fields["workingPattern"]))
    patterns += [(f"blockedPatterns.{i}", p) for i, p in enumerate(fields.get("blockedPatterns") or [])]
    errors = []
    for path, pattern in patterns:
        try:
            regex.compile(pattern, regex.VERSION0)
        except regex.error as error:
            message = interpolate_lazy(_("Not a regular expression: %(error)s."), {"error": str(error)})
            errors.append(field(path, message, "regex"))
    if errors:
        raise fields_error(errors)


def _apply(profile: AgentProfile, fields: dict[str, Any]) -> None:
    for wire, value in fields.items():
        setattr(profile, FIELDS[wire], value)


@transaction.atomic
def create_profile(name: str, fields: dict[str, Any], *, actor: Actor) -> AgentProfile:
    ensure_profiles()
    if AgentProfile.objects.filter(pk=name).exists():
        raise Conflict(_("There is already an agent profile %(name)s."), name=name)
    _check_patterns(fields)
    profile = AgentProfile(name=name)
    _apply(profile, fields)
    profile.save(force_insert=True)
    activity.record("profile.created", {"name": name}, actor=actor)
    return profile


@transaction.atomic
def update_profile(name: str, fields: dict[str, Any], *, actor: Actor) -> AgentProfile:
    profile = get_profile(name)
    _check_patterns(fields)
    _apply(profile, fields)
    profile.save()
    activity.record("profile.updated", {"name": name, "keys": ", ".join(sorted(fields))}, actor=actor)
    return profile


@transaction.atomic
def reset_profile(name: str, *, actor: Actor) -> AgentProfile:
    profile = get_profile(name)
    if not profile.builtin:
        raise Conflict(_("Agent profile %(name)s is not built in: it has nothing to reset to."), name=name)
    defaults = AgentProfile(name=name, builtin=True, **BUILTIN_PROFILES[name])
    for attribute in FIELDS.values():
        setattr(profile, attribute, getattr(defaults, attribute))
    profile.save()
    activity.record("profile.reset", {"name": name}, actor=actor)
    return profile


@transaction.atomic
def delete_profile(name: str, *, actor: Actor) -> None:
    profile = get_profile(name)
    if profile.builtin:
        raise Conflict(_("Agent profile %(name)s is built in: change or reset it instead."), name=name)
    if Agent.objects.filter(profile=name).exclude(status=AgentStatus.EXITED).exists():
        raise Conflict(_("Agents of profile %(name)s are still running."), name=name)
    profile.delete()
    activity.record("profile.deleted", {"name": name}, actor=actor)
