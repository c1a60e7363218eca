"""Agents: CLIs in tmux sessions (`tmux -L cocoon`) inside their sandbox, driven through exec.

Secrets reach an agent through a private env file that its start wrapper reads and deletes — never
argv, never the container's environment. Status comes from the agents' own hooks (cocoon-status
writes /opt/cocoon/status/<id>) and, where they say nothing, from the screen and the foreground process.
"""

import base64
import io
import json
import posixpath
import shlex
import tarfile
import time
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agents.choices import AgentStatus, PromptMode, StatusSource
from agents.models import Agent, AgentProfile, new_agent_id
from cocoon import activity, events, vault
from cocoon.actors import Actor
from cocoon.errors import ErrorCode, RpcError
from sandboxes.choices import SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import AGENT_UID, AGENT_USER, OPT_COCOON, DriverError
from sandboxes.models import Sandbox
from sandboxes.services import get_sandbox, require_running

TMUX = ["tmux", "-L", "cocoon"]
SHELLS = {"bash", "sh", "zsh", "fish", "dash"}
KEYS = {
    "Enter", "Escape", "Tab", "BTab", "Space", "BSpace", "Up", "Down", "Left", "Right", "Home", "End",
    "PageUp", "PageDown", "DC", "C-c", "C-d", "C-z", "C-l", "C-u", "C-a", "C-e", "C-r", "y", "n",
    "1", "2", "3",
}  # fmt: skip
BLOCKED_REGION_LINES = 12  # where on the screen a question counts (the last non-empty lines)
SETTLE_S = 3  # a changing screen must be still this long before working becomes idle
HOOK_FRESHNESS_S = 15  # a hook's `working` with a quiet screen this long hands over to the screen
RECHECK_S = 5  # agent.wait reads the row at least this often, should an event be lost
BUILTIN_PROFILES: dict[str, dict[str, Any]] = {
    "shell": {"command": ["bash", "-l"], "prompt_mode": PromptMode.TYPED},
    "claude-code": {
        "command": ["claude"],
        "prompt_mode": PromptMode.ARGUMENT,
        "env": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"},
        "secrets": ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"],
        "hooks": True,
        "working_pattern": "esc to interrupt",
        "blocked_patterns": ["Do you want to proceed?", "Do you want to make this edit"],
    },
    "codex": {
        "command": ["codex"],
        "prompt_mode": PromptMode.ARGUMENT,
        "secrets": ["OPENAI_API_KEY"],
        "hooks": True,
        "working_pattern": "esc to interrupt",
        "blocked_patterns": ["Allow command?", "Would you like to run the following command?"],
    },
}

activity.register_messages(
    {
        "agent.spawned": _("Agent %(agent)s (%(profile)s) was started in sandbox %(name)s."),
        "agent.killed": _("Agent %(agent)s was stopped."),
        "agent.exited": _("Agent %(agent)s exited with code %(code)s."),
    }
)

# Started by tmux inside the sandbox: read and delete the private env file, run the agent, record its
# exit code where the poller finds it.
WRAPPER = """
id=$1; shift
env_file="$HOME/.cocoon/env/$id"
if [ -f "$env_file" ]; then . "$env_file"; rm -f "$env_file"; fi
if [ -n "${COCOON_PROMPT_STDIN:-}" ]; then printf '%s\\n' "$COCOON_PROMPT_STDIN" | "$@"; else "$@"; fi
echo $? > "/opt/cocoon/status/$id.exit"
"""
# One exec per sandbox per poll: for every agent, whether its session lives, its exit code and hook
# status, the foreground command and a hash of the screen.
POLL = """
for pair in "$@"; do
  id=${pair%%=*}; known=${pair#*=}
  hook=$(cat "/opt/cocoon/status/$id" 2>/dev/null); code=$(cat "/opt/cocoon/status/$id.exit" 2>/dev/null)
  text=
  if tmux -L cocoon has-session -t "=$id" 2>/dev/null; then
    alive=1; command=$(tmux -L cocoon display-message -p -t "=$id:" '#{pane_current_command}')
    screen=$(tmux -L cocoon capture-pane -p -t "=$id:" | md5sum | cut -c1-32)
    # The screen's text only when it changed: the patterns need it, the steady state does not.
    [ "$screen" = "$known" ] || text=$(tmux -L cocoon capture-pane -p -t "=$id:" | base64 -w0)
  else alive=0; command=; screen=; fi
  printf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n' "$id" "$alive" "$code" "$hook" "$command" "$screen" "$text"
done
"""


def ensure_profiles() -> None:
    for name, fields in BUILTIN_PROFILES.items():
        AgentProfile.objects.get_or_create(name=name, defaults={**fields, "builtin": True})


def get_profile(name: str) -> AgentProfile:
    ensure_profiles()
    profile = AgentProfile.objects.filter(pk=name).first()
    if profile is None:
        raise RpcError(ErrorCode.NOT_FOUND, _("There is no agent profile %(name)s."), name=name)
    return profile


def get_agent(agent_id: str) -> Agent:
    agent = Agent.objects.select_related("sandbox").filter(pk=agent_id).first()
    if agent is None:
        raise RpcError(ErrorCode.NOT_FOUND, _("Agent %(id)s does not exist."), id=agent_id)
    return agent


def serialize(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "sandboxId": agent.sandbox_id,
        "profile": agent.profile,
        "status": agent.status,
        "statusSource": agent.status_source,
        "exitCode": agent.exit_code,
        "createdAt": agent.created_at.isoformat(),
        "lastActivityAt": agent.last_activity_at.isoformat(),
    }


def _exec(sandbox: Sandbox, command: list[str], stdin: bytes | None = None) -> str:
    result = get_driver().exec(sandbox.id, command, stdin=stdin, timeout=30)
    if result.exit_code != 0:
        raise DriverError(result.stderr.decode(errors="replace").strip()[-500:] or f"exit {result.exit_code}")
    return result.stdout.decode(errors="replace")


def spawn_agent(
    sandbox_id: str,
    profile_name: str,
    *,
    actor: Actor,
    prompt: str | None = None,
    env: dict[str, str] | None = None,
    cols: int = 120,
    rows: int = 40,
) -> Agent:
    sandbox = get_sandbox(sandbox_id)
    require_running(sandbox)
    profile = get_profile(profile_name)
    # The row is written once the session exists: the poller must never see an agent whose tmux
    # session is not there yet (it would take it for exited).
    agent = Agent(id=new_agent_id(), sandbox=sandbox, profile=profile.name, status=AgentStatus.WORKING)
    variables = {**profile.env, **(env or {}), "COCOON_AGENT_ID": agent.id}
    for name in profile.secrets:
        if (value := vault.read_secret(name)) is not None:
            variables[name] = value
    command = list(profile.command)
    if prompt and profile.prompt_mode == PromptMode.ARGUMENT:
        command.append(prompt)
    elif prompt and profile.prompt_mode == PromptMode.STDIN:
        variables["COCOON_PROMPT_STDIN"] = prompt
    env_file = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in variables.items())
    try:
        if profile.hooks:
            get_driver().put_archive(sandbox.id, f"/home/{AGENT_USER}", _hook_files(profile, variables))
        _exec(
            sandbox,
            [
                "sh",
                "-c",
                'umask 077 && mkdir -p "$HOME/.cocoon/env" && cat > "$HOME/.cocoon/env/$1"',
                "env",
                agent.id,
            ],
            stdin=env_file.encode(),
        )
        _exec(
            sandbox,
            [
                *TMUX,
                "new-session",
                "-d",
                "-s",
                agent.id,
                "-x",
                str(cols),
                "-y",
                str(rows),
                "sh",
                "-c",
                WRAPPER,
                "agent",
                agent.id,
                *command,
            ],
        )
    except BaseException:
        get_driver().exec(
            sandbox.id, ["sh", "-c", 'rm -f "$HOME/.cocoon/env/$1"', "rm", agent.id], timeout=30
        )
        raise
    with transaction.atomic():
        agent.save(force_insert=True)
        activity.record(
            "agent.spawned",
            {"agent": agent.id, "profile": profile.name, "name": sandbox.name},
            actor=actor,
            sandbox_id=sandbox.id,
            agent_id=agent.id,
        )
        _publish(agent)
    if prompt and profile.prompt_mode == PromptMode.TYPED:
        send_input(agent.id, prompt, actor=actor)
    return agent


def _hook_files(profile: AgentProfile, variables: dict[str, str]) -> bytes:
    """The agent CLIs' own configuration that makes them report to cocoon-status and skips their
    first-run dialogs (a tar for the agent's home)."""
    files: dict[str, str] = {}
    if profile.name == "claude-code":
        files[".claude/settings.json"] = (OPT_COCOON / "hooks" / "claude-code.json").read_text()
        state: dict[str, Any] = {
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "projects": {
                "/workspace": {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}
            },
        }
        if key := variables.get("ANTHROPIC_API_KEY"):
            state["customApiKeyResponses"] = {"approved": [key[-20:]], "rejected": []}
        files[".claude.json"] = json.dumps(state)
    elif profile.name == "codex":
        # cocoon's sandbox is the sandbox: Codex's own bwrap cannot run inside a container.
        config = (OPT_COCOON / "hooks" / "codex.toml").read_text()
        config += 'sandbox_mode = "danger-full-access"\napproval_policy = "on-request"\n'
        if base_url := variables.get("OPENAI_BASE_URL"):
            # Codex reads endpoints from its config, not from OPENAI_BASE_URL.
            config += (
                'model_provider = "cocoon"\n\n[model_providers.cocoon]\nname = "cocoon"\n'
                f"base_url = {json.dumps(base_url)}\n"
                'env_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
            )
        config += '\n[projects."/workspace"]\ntrust_level = "trusted"\n'
        files[".codex/config.toml"] = config
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


def _publish(agent: Agent) -> None:
    events.publish("agent.updated", serialize(agent), sandbox_id=agent.sandbox_id, agent_id=agent.id)


def _live(agent_id: str) -> Agent:
    agent = get_agent(agent_id)
    if agent.status == AgentStatus.EXITED:
        raise RpcError(ErrorCode.CONFLICT, _("Agent %(id)s has exited."), id=agent.id)
    require_running(agent.sandbox)
    return agent


def send_input(agent_id: str, text: str, *, actor: Actor, enter: bool = True) -> None:
    agent = _live(agent_id)
    _exec(agent.sandbox, [*TMUX, "send-keys", "-t", f"={agent.id}:", "-l", "--", text])
    if enter:
        _exec(agent.sandbox, [*TMUX, "send-keys", "-t", f"={agent.id}:", "Enter"])
    Agent.objects.filter(pk=agent.pk).update(last_input_at=timezone.now())


def send_keys(agent_id: str, keys: list[str], *, actor: Actor) -> None:
    unknown = [key for key in keys if key not in KEYS]
    if unknown:
        raise RpcError(ErrorCode.INVALID_PARAMS, _("Unknown keys: %(keys)s."), keys=", ".join(unknown))
    agent = _live(agent_id)
    _exec(agent.sandbox, [*TMUX, "send-keys", "-t", f"={agent.id}:", *keys])
    Agent.objects.filter(pk=agent.pk).update(last_input_at=timezone.now())


def read_screen(agent_id: str, scrollback: int = 0) -> dict[str, Any]:
    agent = get_agent(agent_id)
    require_running(agent.sandbox)
    if agent.status == AgentStatus.EXITED:
        raise RpcError(ErrorCode.CONFLICT, _("Agent %(id)s has exited."), id=agent.id)
    result: dict[str, Any] = {
        "screen": _exec(agent.sandbox, [*TMUX, "capture-pane", "-p", "-t", f"={agent.id}:"])
    }
    if scrollback:
        result["scrollback"] = _exec(
            agent.sandbox,
            [*TMUX, "capture-pane", "-p", "-t", f"={agent.id}:", "-S", f"-{scrollback}", "-E", "-1"],
        )
    return result


def kill_agent(agent_id: str, *, actor: Actor) -> Agent:
    agent = get_agent(agent_id)
    if agent.status != AgentStatus.EXITED and agent.sandbox.state == SandboxState.RUNNING:
        get_driver().exec(agent.sandbox.id, [*TMUX, "kill-session", "-t", f"={agent.id}:"], timeout=30)
    with transaction.atomic():
        agent.status, agent.status_source = AgentStatus.EXITED, StatusSource.HEURISTIC
        agent.save(update_fields=["status", "status_source"])
        activity.record(
            "agent.killed", {"agent": agent.id}, actor=actor, sandbox_id=agent.sandbox_id, agent_id=agent.id
        )
        _publish(agent)
    return agent


def _decide(
    agent: Agent,
    profile: AgentProfile,
    alive: bool,
    code: str,
    hook: str,
    command: str,
    screen: str,
    text: str | None,
) -> tuple[str, str, int | None]:
    """The status an observation means (SPEC §4): exit first, then fresh hooks, then the screen."""
    if not alive:
        return (
            AgentStatus.EXITED,
            StatusSource.HEURISTIC,
            int(code) if code.strip().lstrip("-").isdigit() else None,
        )
    if profile.hooks and hook:
        status, _sep, stamp = hook.partition(" ")
        reported = float(stamp or 0)
        after_input = agent.last_input_at is None or reported >= agent.last_input_at.timestamp()
        quiet = (
            screen == agent.screen_hash
            and time.time() - agent.last_activity_at.timestamp() > HOOK_FRESHNESS_S
        )
        if after_input and status in AgentStatus.values and not (status == AgentStatus.WORKING and quiet):
            return status, StatusSource.HOOK, None
    if profile.name == "shell" or not profile.hooks:
        busy = command and command not in SHELLS
        return (AgentStatus.WORKING if busy else AgentStatus.IDLE), StatusSource.HEURISTIC, None
    if text is not None:  # the screen changed
        # Questions are asked at the bottom: prose further up that quotes one is not a prompt.
        bottom = "\n".join([line for line in text.splitlines() if line.strip()][-BLOCKED_REGION_LINES:])
        if any(pattern in bottom for pattern in profile.blocked_patterns):
            return AgentStatus.BLOCKED, StatusSource.HEURISTIC, None
        return AgentStatus.WORKING, StatusSource.HEURISTIC, None
    # An unchanged screen keeps a question standing; a busy one settles to idle.
    if agent.status == AgentStatus.BLOCKED:
        return AgentStatus.BLOCKED, agent.status_source, None
    settled = time.time() - agent.last_activity_at.timestamp() > SETTLE_S
    if agent.status == AgentStatus.WORKING and not settled:
        return agent.status, agent.status_source, None
    return AgentStatus.IDLE, StatusSource.HEURISTIC, None


def poll_sandbox(sandbox: Sandbox) -> int:
    """Update every agent of one sandbox from a single exec; returns how many changed."""
    agents = {agent.id: agent for agent in sandbox.agents.exclude(status=AgentStatus.EXITED)}
    if not agents or sandbox.state != SandboxState.RUNNING:
        return 0
    pairs = [f"{agent.id}={agent.screen_hash}" for agent in agents.values()]
    output = _exec(sandbox, ["sh", "-c", POLL, "poll", *pairs])
    profiles = {
        profile.name: profile
        for profile in AgentProfile.objects.filter(name__in={a.profile for a in agents.values()})
    }
    changed = 0
    for line in output.splitlines():
        agent_id, alive, code, hook, command, screen, encoded = (line.split("\t") + [""] * 7)[:7]
        agent = agents.get(agent_id)
        if agent is None or agent.profile not in profiles:
            continue
        text = base64.b64decode(encoded).decode(errors="replace") if encoded else None
        status, source, exit_code = _decide(
            agent, profiles[agent.profile], alive == "1", code, hook, command, screen, text
        )
        now = timezone.now()
        if screen and screen != agent.screen_hash:
            agent.screen_hash, agent.last_activity_at = screen, now
        if (status, source, exit_code) != (agent.status, agent.status_source, agent.exit_code):
            agent.status, agent.status_source, agent.exit_code = status, source, exit_code
            with transaction.atomic():
                agent.save()
                if status == AgentStatus.EXITED:
                    activity.record(
                        "agent.exited",
                        {"agent": agent.id, "code": exit_code},
                        sandbox_id=sandbox.id,
                        agent_id=agent.id,
                    )
                _publish(agent)
            changed += 1
        else:
            agent.save(update_fields=["screen_hash", "last_activity_at"])
    return changed


def poll_all() -> int:
    changed = 0
    for sandbox in (
        Sandbox.objects.filter(state=SandboxState.RUNNING, agents__isnull=False)
        .exclude(agents__status=AgentStatus.EXITED)
        .distinct()
    ):
        try:
            changed += poll_sandbox(sandbox)
        except DriverError:
            continue
    return changed


def wait_for(agent_id: str, until: list[str], timeout_s: float) -> Agent:
    """Block until the agent reaches one of the statuses, bounded by timeout_s.

    Woken by the agent's events (the poller publishes every change), never by polling the sandbox;
    the row is read again after each event, and every RECHECK_S in case an event was lost.
    """
    deadline = time.monotonic() + timeout_s
    # Listening starts before the first read, so a change between the two is still heard.
    with events.listen(events.agent_group(agent_id)) as next_event:
        agent = get_agent(agent_id)
        while agent.status not in until:
            remaining = deadline - time.monotonic()
            if agent.status == AgentStatus.EXITED or remaining <= 0:
                raise RpcError(
                    ErrorCode.TIMEOUT,
                    _("Agent %(id)s did not reach %(until)s; it is %(status)s."),
                    details={"agent": serialize(agent)},
                    id=agent.id,
                    until=", ".join(until),
                    status=agent.status,
                )
            next_event(min(remaining, RECHECK_S))
            agent = get_agent(agent_id)
    return agent


def list_agents(sandbox_id: str | None = None) -> list[Agent]:
    agents = Agent.objects.all()
    if sandbox_id:
        agents = agents.filter(sandbox_id=sandbox_id)
    return list(agents)
