"""The agent CLIs' own configuration that makes them report to cocoon-status and skips their first-run
dialogs, merged into what the agent user already has: the user's keys stay, cocoon's entries are
replaced (so a respawn changes nothing), and a file cocoon cannot read is refused, never overwritten.
"""

import base64
import io
import json
import posixpath
import tarfile
import tomllib
from typing import Any

import tomlkit
from django.utils.translation import gettext_lazy as _

from agents.models import AgentProfile
from cocoon.config import deep_merge
from cocoon.errors import Conflict
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import AGENT_UID, AGENT_USER, OPT_COCOON, DriverError

STATUS_COMMAND = "/opt/cocoon/bin/cocoon-status"  # what marks a hook entry as cocoon's
CLAUDE_SETTINGS, CLAUDE_STATE, CODEX_CONFIG = ".claude/settings.json", ".claude.json", ".codex/config.toml"
FILES = {"claude": (CLAUDE_SETTINGS, CLAUDE_STATE), "codex": (CODEX_CONFIG,)}  # by the command's name
# Prints each file of the agent's home as base64 on a line of its own, "-" for a missing one.
READ = 'cd && for f; do if [ -f "$f" ]; then base64 -w0 "$f"; else printf -; fi; echo; done'


def install(sandbox_id: str, profile: AgentProfile, variables: dict[str, str]) -> None:
    """Merge cocoon's hooks and first-run answers into the agent user's configuration files."""
    paths = FILES.get(posixpath.basename(profile.command[0]), ())
    if not paths:
        return
    result = get_driver().exec(sandbox_id, ["sh", "-c", READ, "read", *paths], timeout=30)
    if result.exit_code != 0:
        raise DriverError(result.stderr.decode(errors="replace").strip()[-500:])
    lines = result.stdout.decode().splitlines()
    existing = [None if data == "-" else base64.b64decode(data).decode() for data in lines]
    files = {path: _merge(path, text, variables) for path, text in zip(paths, existing, strict=True)}
    get_driver().put_archive(sandbox_id, f"/home/{AGENT_USER}", _tar(files))


def _merge(path: str, text: str | None, variables: dict[str, str]) -> str:
    try:
        if path == CODEX_CONFIG:
            return merge_codex_config(text or "", variables)
        current = json.loads(text) if text and text.strip() else {}
    except (ValueError, tomllib.TOMLDecodeError) as error:  # tomlkit's ParseError is a ValueError
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
    """The user's settings with cocoon's hook groups in place of any earlier ones of cocoon."""
    ours = json.loads((OPT_COCOON / "hooks" / "claude-code.json").read_text())["hooks"]
    hooks = dict(current.get("hooks") or {})
    for event, groups in ours.items():
        kept = [group for group in hooks.get(event) or [] if not _is_ours(group)]
        hooks[event] = kept + groups
    return current | {"hooks": hooks}


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
    """The user's config.toml (comments and all, through tomlkit) with cocoon's notify, sandbox mode,
    provider and workspace trust merged in."""
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
    _merge_into(document, ours)
    return tomlkit.dumps(document)


def _merge_into(document: Any, ours: dict[str, Any]) -> None:
    for key, value in ours.items():
        if isinstance(value, dict) and isinstance(document.get(key), dict):
            _merge_into(document[key], value)
        else:
            document[key] = value


def _tar(files: dict[str, str]) -> bytes:
    """A tar of files for the agent's home, owned by the agent user and private to it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in sorted({posixpath.dirname(name) for name in files} - {""}):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o700, AGENT_UID, AGENT_UID
            tar.addfile(info)
        for name, content in files.items():
            data = content.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), 0o600, AGENT_UID, AGENT_UID
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
