"""The agent CLIs' own configuration that makes them report to cocoon-status and skips their first-run
dialogs, merged into what the agent user already has: the user's keys stay, cocoon's entries are
replaced (so a respawn changes nothing), and a file cocoon cannot read is refused, never overwritten.

Which hook events, and why (images/sandbox/opt-cocoon/hooks/; read from Claude Code 2.1.197 and Codex
0.171.0 themselves): see docs/architecture.md, "Hook events".
"""

import hashlib
import json
import posixpath
import tomllib
from typing import Any

import tomlkit
from django.utils.translation import gettext_lazy as _
from tomlkit.items import Item

from agents.models import AgentProfile
from cocoon.config import deep_merge
from cocoon.errors import Conflict
from sandboxes.drivers.base import AGENT_HOME, OPT_COCOON

STATUS_COMMAND = "/opt/cocoon/bin/cocoon-status"  # what marks a hook entry as cocoon's
CLAUDE_SETTINGS, CLAUDE_STATE, CODEX_CONFIG = ".claude/settings.json", ".claude.json", ".codex/config.toml"
CLAUDE_PERMISSION_MODE = "default"  # asks before a tool runs: the agent is `blocked` until answered
FILES = {"claude": (CLAUDE_SETTINGS, CLAUDE_STATE), "codex": (CODEX_CONFIG,)}  # by the command's name


def paths(profile: AgentProfile) -> tuple[str, ...]:
    """The files in the agent's home that cocoon merges its entries into, for this profile's CLI."""
    return FILES.get(posixpath.basename(profile.command[0]), ()) if profile.hooks else ()


def merge(found: dict[str, bytes | None], variables: dict[str, str]) -> dict[str, str]:
    """Each file (what the sandbox holds in it, None for none) with cocoon's hooks and first-run answers
    merged in."""
    return {path: _merge(path, data, variables) for path, data in found.items()}


def _merge(path: str, data: bytes | None, variables: dict[str, str]) -> str:
    try:
        text = None if data is None else data.decode()
        if path == CODEX_CONFIG:
            return merge_codex_config(text or "", variables)
        current = json.loads(text) if text and text.strip() else {}
    except (ValueError, tomllib.TOMLDecodeError) as error:  # tomlkit's ParseError, bad UTF-8: ValueErrors
        raise Conflict(
            _("~/%(path)s in the sandbox cannot be read (%(error)s): fix or remove it."),
            path=path,
            error=str(error),
        ) from error
    if not isinstance(current, dict):
        current = {}
    if path == CLAUDE_SETTINGS:
        return json.dumps(merge_claude_settings(current), indent=2)
    return json.dumps(merge_claude_state(current, variables.get("ANTHROPIC_API_KEY")))


def merge_claude_settings(current: dict[str, Any]) -> dict[str, Any]:
    """The user's settings with cocoon's hook groups in place of any earlier ones of cocoon, and the
    permission mode stated unless the user chose one: newer Claude Codes start in `auto` (tools run
    unasked), older ones ask; an agent behaves the same whichever version the toolbox installed."""
    ours = json.loads((OPT_COCOON / "hooks" / "claude-code.json").read_text())["hooks"]
    permissions = current.get("permissions")
    permissions = dict(permissions) if isinstance(permissions, dict) else {}
    permissions.setdefault("defaultMode", CLAUDE_PERMISSION_MODE)
    return current | {"hooks": _merge_hooks(current.get("hooks"), ours), "permissions": permissions}


def _merge_hooks(current: Any, ours: dict[str, list[Any]]) -> dict[str, Any]:
    """Each event's hook groups: the user's first, then cocoon's (replacing any earlier ones of cocoon)."""
    hooks = dict(current) if isinstance(current, dict) else {}
    for event, groups in ours.items():
        found = hooks.get(event)
        kept = [group for group in found if not _is_ours(group)] if isinstance(found, list) else []
        hooks[event] = kept + groups
    return hooks


def _is_ours(group: Any) -> bool:
    entries = group.get("hooks") if isinstance(group, dict) else None
    return any(str(entry.get("command", "")).startswith(STATUS_COMMAND) for entry in entries or [])


def merge_claude_state(current: dict[str, Any], api_key: str | None) -> dict[str, Any]:
    """Claude Code's ~/.claude.json with onboarding, theme and workspace trust answered, and the API
    key (its last 20 characters) pre-approved next to any the user approved."""
    state = deep_merge(
        {"theme": "dark"} | current,
        {
            "hasCompletedOnboarding": True,
            "projects": {
                "/workspace": {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}
            },
        },
    )
    if api_key:
        responses = state.get("customApiKeyResponses") or {}
        approved = [key for key in responses.get("approved") or [] if key != api_key[-20:]]
        state["customApiKeyResponses"] = {
            "approved": [*approved, api_key[-20:]],
            "rejected": [key for key in responses.get("rejected") or [] if key != api_key[-20:]],
        }
    return state


def merge_codex_config(text: str, variables: dict[str, str]) -> str:
    """The user's config.toml (comments and all, through tomlkit) with cocoon's notify, hooks (trusted),
    sandbox mode, provider and workspace trust merged in."""
    ours: dict[str, Any] = tomllib.loads((OPT_COCOON / "hooks" / "codex.toml").read_text())
    # cocoon's sandbox is the sandbox: Codex's own bwrap cannot run inside a container.
    ours |= {"sandbox_mode": "danger-full-access", "projects": {"/workspace": {"trust_level": "trusted"}}}
    if base_url := variables.get("OPENAI_BASE_URL"):
        # Codex reads endpoints from its config, not from OPENAI_BASE_URL.
        provider = {
            "name": "cocoon",
            "base_url": base_url,
            "env_key": "OPENAI_API_KEY",
            "wire_api": "responses",
        }
        ours |= {"model_provider": "cocoon", "model_providers": {"cocoon": provider}}
    document = tomlkit.parse(text)
    document.setdefault("approval_policy", "on-request")
    current = document.get("hooks")
    hooks = _merge_hooks(current.unwrap() if isinstance(current, Item) else None, ours.pop("hooks"))
    state = hooks.get("state")
    hooks["state"] = (state if isinstance(state, dict) else {}) | _codex_trust(hooks)
    document["hooks"] = hooks
    _merge_into(document, ours)
    return tomlkit.dumps(document)


def _codex_trust(hooks: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Codex runs a hook of the user's config only once it is trusted: a `hooks.state` entry, keyed by
    file, event and position, holding the hash of the hook's content (as Codex 0.171 computes it, and
    reports it in its app-server's hooks/list). cocoon trusts its own hooks, no others; should a Codex
    hash differently, it skips them, and notify still reports each turn's end."""
    trust = {}
    for event, groups in hooks.items():
        if event == "state" or not isinstance(groups, list):
            continue
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in event).lstrip("_")
        for index, group in enumerate(groups):
            if not _is_ours(group):
                continue
            handlers = [{"async": False, "timeout": 600} | handler for handler in group["hooks"]]
            identity = json.dumps(
                {"event_name": snake, "hooks": handlers}, sort_keys=True, separators=(",", ":")
            )
            digest = hashlib.sha256(identity.encode()).hexdigest()
            trust[f"{AGENT_HOME}/{CODEX_CONFIG}:{snake}:{index}:0"] = {"trusted_hash": f"sha256:{digest}"}
    return trust


def _merge_into(document: Any, ours: dict[str, Any]) -> None:
    for key, value in ours.items():
        if isinstance(value, dict) and isinstance(document.get(key), dict):
            _merge_into(document[key], value)
        else:
            document[key] = value
