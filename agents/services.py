"""Agents: CLIs in tmux sessions (`tmux -L cocoon`) inside their sandbox, driven through exec.

Secrets reach an agent through a private env file that its start wrapper reads and deletes — never
argv, never the container's environment. Status comes from the agents' own hooks (cocoon-status
writes /opt/cocoon/status/<id>) and, where they say nothing, from the screen and the foreground process.
"""

import base64
import binascii
import logging
import re
import shlex
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from agents import hooks
from agents import status as rules
from agents.choices import AgentStatus, PromptMode, StatusRule, StatusSource
from agents.models import Agent, AgentProfile, new_agent_id
from agents.pollclaims import get_claims
from agents.profiles import get_profile, screen_rules
from cocoon import activity, events
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import ErrorCode, RpcError
from egress import providers as egress_providers
from egress import services as egress
from sandboxes.choices import SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError
from sandboxes.models import Sandbox
from sandboxes.services import get_sandbox, require_running

logger = logging.getLogger(__name__)

TMUX = ["tmux", "-L", "cocoon"]
KEYS = {
    "Enter", "Escape", "Tab", "BTab", "Space", "BSpace", "Up", "Down", "Left", "Right", "Home", "End",
    "PageUp", "PageDown", "DC", "C-c", "C-d", "C-z", "C-l", "C-u", "C-a", "C-e", "C-r", "y", "n",
    "1", "2", "3",
}  # fmt: skip
RECHECK_S = 5  # agent.wait reads the row at least this often, should an event be lost
POLL_PARALLEL = 8  # sandboxes polled at once
POLL_TIMEOUT_S = 10  # a sandbox that cannot answer the poll in this time is asked again next tick
RULE_MESSAGES = {
    StatusRule.SPAWNED: _("It was just started; the poller has not looked at it yet."),
    StatusRule.KILLED: _("It was stopped through cocoon."),
    StatusRule.SESSION_ENDED: _("Its tmux session has ended."),
    StatusRule.HOOK: _("Its own hook reported this status %(age)s s ago."),
    StatusRule.FOREGROUND_PROCESS: _("The command %(detail)s runs in the foreground."),
    StatusRule.SHELL_PROMPT: _("The shell waits at its prompt: no command runs in the foreground."),
    StatusRule.QUESTION: _("A known question stands still on the screen (pattern %(detail)s)."),
    StatusRule.WORKING_INDICATOR: _("The screen shows the profile's working indicator."),
    StatusRule.START_UP_GRACE: _("It started less than %(grace)s s ago: its screen is not judged yet."),
    StatusRule.SCREEN_CHANGING: _("The screen is changing."),
    StatusRule.SETTLING: _("The screen stopped changing less than %(settle)s s ago."),
    StatusRule.QUIET_AFTER_TASK: _("The screen has been still for %(quiet)s s after it worked on its input."),
    StatusRule.QUIET: _("The screen has been still for %(quiet)s s and it has had no task yet."),
}

activity.register_messages(
    {
        "agent.spawned": _("Agent %(agent)s (%(profile)s) was started in sandbox %(name)s."),
        "agent.killed": _("Agent %(agent)s was stopped."),
        "agent.exited": _("Agent %(agent)s exited with code %(code)s."),
    },
    visibility=Visibility.AGENT,
)
events.register_types("agent.updated", visibility=Visibility.AGENT)

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
# status, the foreground command and a hash of the screen. Everything it reads is the sandbox's: a
# bounded amount, never blocking on it (a FIFO), printable bytes only so that one agent's files cannot
# forge another agent's line. The host checks it all again (_poll_fields, _observe).
POLL = """
clean() { tr -c '[:graph:] ' ' '; }
small() { dd if="$1" bs=128 count=1 iflag=nonblock 2>/dev/null | clean; }
for pair in "$@"; do
  id=${pair%%=*}; known=${pair#*=}
  hook=$(small "/opt/cocoon/status/$id"); code=$(small "/opt/cocoon/status/$id.exit")
  text=
  if tmux -L cocoon has-session -t "=$id" 2>/dev/null; then
    alive=1
    command=$(tmux -L cocoon display-message -p -t "=$id:" '#{pane_current_command}' | head -c 100 | clean)
    screen=$(tmux -L cocoon capture-pane -p -t "=$id:" | md5sum | cut -c1-32)
    # The screen's bottom only when it changed: the patterns need it, the steady state does not.
    # (The echo: a changed but blank screen still sends something.)
    [ "$screen" = "$known" ] || text=$( { tmux -L cocoon capture-pane -p -t "=$id:" \\
      | sed '/^[[:space:]]*$/d' | tail -n 50 | cut -c1-1024; echo; } | base64 -w0)
  else alive=0; command=; screen=; fi
  printf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n' "$id" "$alive" "$code" "$hook" "$command" "$screen" "$text"
done
"""
POLL_FIELDS = 7
SCREEN_HASH = re.compile(r"[0-9a-f]{32}")
SCREEN_TEXT_MAX = 96 * 1024  # base64 characters of a screen's bottom (50 lines of 1024 bytes fit)


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
    providers: list[str] | None = None,
    model: str | None = None,
    cols: int = 120,
    rows: int = 40,
) -> Agent:
    sandbox = get_sandbox(sandbox_id)
    require_running(sandbox)
    profile = get_profile(profile_name)
    # The row is written once the session exists: the poller must never see an agent whose tmux
    # session is not there yet (it would take it for exited).
    # A first prompt is the agent's first input: it has a task from the start.
    agent = Agent(
        id=new_agent_id(),
        sandbox=sandbox,
        profile=profile.name,
        status=AgentStatus.WORKING if prompt else AgentStatus.UNKNOWN,
        last_input_at=timezone.now() if prompt else None,
    )
    credentials, granted = egress_providers.credentials_env(
        sandbox, providers, profile, model or profile.default_model, get_driver().host_alias, actor
    )
    variables = {**profile.env, **credentials, **(env or {}), "COCOON_AGENT_ID": agent.id}
    if granted:
        egress.grant(sandbox, granted)
    command = list(profile.command)
    if prompt and profile.prompt_mode == PromptMode.ARGUMENT:
        command.append(prompt)
    elif prompt and profile.prompt_mode == PromptMode.STDIN:
        variables["COCOON_PROMPT_STDIN"] = prompt
    env_file = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in variables.items())
    try:
        if profile.hooks:
            hooks.install(sandbox.id, profile, variables)
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
        agent.rule, agent.rule_detail = StatusRule.KILLED, ""
        agent.save(update_fields=["status", "status_source", "rule", "rule_detail"])
        activity.record(
            "agent.killed", {"agent": agent.id}, actor=actor, sandbox_id=agent.sandbox_id, agent_id=agent.id
        )
        _publish(agent)
    return agent


def poll_all(only: str | None = None) -> int:
    """One tick of the poller: one exec per sandbox with a live agent (or only that sandbox), many
    sandboxes at once (each exec mostly waits for the engine); returns how many agents changed status.

    A sandbox still being polled by an earlier tick, in this process or another (agents.pollclaims), is
    left to it, so no agent is ever decided twice at once, and a slow sandbox holds up only itself."""
    live = Agent.objects.exclude(status=AgentStatus.EXITED).filter(sandbox__state=SandboxState.RUNNING)
    if only:
        live = live.filter(sandbox_id=only)
    claims = get_claims()
    claimed = claims.claim(set(live.values_list("sandbox_id", flat=True)))
    if not claimed:
        return 0
    unreleased = set(claimed)
    changed = 0
    try:
        by_sandbox: dict[str, dict[str, Agent]] = {sandbox_id: {} for sandbox_id in claimed}
        for agent in live.filter(sandbox_id__in=claimed):  # read after claiming: never a stale row
            by_sandbox[agent.sandbox_id][agent.id] = agent
        names = {agent.profile for agents in by_sandbox.values() for agent in agents.values()}
        profiles = {p.name: screen_rules(p) for p in AgentProfile.objects.filter(name__in=names)}
        with ThreadPoolExecutor(min(POLL_PARALLEL, len(claimed))) as pool:
            polls = {pool.submit(_poll_output, item): item for item in by_sandbox.items()}
            for done in as_completed(polls):
                sandbox_id, agents = polls[done]
                for agent_id, fields in _poll_fields(done.result() or "", agents).items():
                    agent = agents[agent_id]
                    if agent.profile not in profiles:
                        continue
                    # One agent's hostile report must never cost the others their status.
                    try:
                        changed += _observe(agent, profiles[agent.profile], fields[0] == "1", *fields[1:])
                    except Exception:
                        logger.exception("the poll of agent %s could not be read", agent_id)
                unreleased.discard(sandbox_id)
                claims.release(sandbox_id, polled=True)
    finally:
        for sandbox_id in unreleased:
            claims.release(sandbox_id, polled=False)
    return changed


def _poll_output(item: tuple[str, dict[str, Agent]]) -> str | None:
    """The poll script's report on one sandbox's agents; None when the sandbox could not be reached
    (reconcile notices a sandbox that went away)."""
    sandbox_id, agents = item
    pairs = [f"{agent.id}={agent.screen_hash}" for agent in agents.values()]
    try:
        result = get_driver().exec(sandbox_id, ["sh", "-c", POLL, "poll", *pairs], timeout=POLL_TIMEOUT_S)
    except DriverError:
        return None
    except Exception:  # one sandbox's failure must not end the tick for the others
        logger.exception("the poll of sandbox %s failed", sandbox_id)
        return None
    return result.stdout.decode(errors="replace") if result.exit_code == 0 else None


def _poll_fields(output: str, agents: dict[str, Agent]) -> dict[str, list[str]]:
    """Each polled agent's fields (alive, code, hook, command, screen hash, screen text) from the poll
    script's report. Malformed lines, lines about other agents and repeats are dropped: an agent
    without a line is simply not decided this tick."""
    found: dict[str, list[str]] = {}
    for line in output.split("\n"):  # not splitlines(): it also splits at \x1c, \x85, U+2028...
        agent_id, *fields = line.split("\t")
        if len(fields) == POLL_FIELDS - 1 and agent_id in agents and agent_id not in found:
            found[agent_id] = fields
    return found


def _screen_text(encoded: str) -> str:
    """The screen's bottom as the poll sent it, bounded; "" when it is not base64."""
    if len(encoded) > SCREEN_TEXT_MAX:  # keep the bottom, cut at a base64 quantum
        encoded = encoded[len(encoded) % 4 :][-SCREEN_TEXT_MAX:]
    try:
        return base64.b64decode(encoded, validate=True).decode(errors="replace")
    except (binascii.Error, ValueError):
        return ""


def _observe(
    agent: Agent,
    profile_rules: rules.ScreenRules,
    alive: bool,
    code: str,
    hook: str,
    command: str,
    screen: str,
    encoded: str,
) -> bool:
    """Decide one agent's status from what the poll saw; save what changed, publish a new status."""
    now = timezone.now()
    facts = None
    screen = screen if SCREEN_HASH.fullmatch(screen) else ""
    if encoded:  # the screen changed: its text came along
        facts = rules.read_screen(profile_rules, _screen_text(encoded))
        if facts.timed_out:
            logger.warning("agent %s: patterns out of time count as no match: %s", agent.id, facts.timed_out)
    memory = rules.Memory(
        status=agent.status,
        created_at=agent.created_at.timestamp(),
        last_input_at=agent.last_input_at.timestamp() if agent.last_input_at else None,
        last_change_at=agent.last_activity_at.timestamp(),
        screen=rules.ScreenFacts(agent.screen_indicator, agent.screen_question),
    )
    exit_code = rules.parse_exit_code(code)
    seen = rules.Observation(alive, exit_code, hook.strip()[:100], command.strip()[:100], facts)
    decision = rules.decide(profile_rules, memory, seen, now.timestamp())
    before = (agent.status, agent.status_source, agent.exit_code)
    fields = {
        "status": decision.status,
        "status_source": decision.source,
        "exit_code": decision.exit_code,
        "rule": decision.rule,
        "rule_detail": decision.detail[:300],
        "hook_report": seen.hook,
        "foreground": seen.command,
    }
    if screen and screen != agent.screen_hash:
        fields |= {"screen_hash": screen, "last_activity_at": now}
    if facts is not None:
        fields |= {"screen_indicator": facts.indicator, "screen_question": facts.question[:300]}
    dirty = [name for name, value in fields.items() if getattr(agent, name) != value]
    if not dirty:  # the steady state writes nothing
        return False
    for name in dirty:
        setattr(agent, name, fields[name])
    if (agent.status, agent.status_source, agent.exit_code) == before:
        agent.save(update_fields=dirty)
        return False
    with transaction.atomic():
        agent.save(update_fields=dirty)
        if agent.status == AgentStatus.EXITED:
            activity.record(
                "agent.exited",
                {"agent": agent.id, "code": agent.exit_code},
                sandbox_id=agent.sandbox_id,
                agent_id=agent.id,
            )
        _publish(agent)
    return True


def wait_for(agent_id: str, until: list[str], timeout_s: float) -> Agent:
    """Block until the agent reaches one of the statuses, bounded by timeout_s.

    Woken by the agent's events (the poller publishes every change). After RECHECK_S without one, and
    only if no process polled that sandbox meanwhile (no poller running: a worker without beat, tests),
    it polls the agent's sandbox itself.
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
            heard = next_event(min(remaining, RECHECK_S))
            if heard is None and not get_claims().polled_within(agent.sandbox_id, RECHECK_S):
                poll_all(only=agent.sandbox_id)
            agent = get_agent(agent_id)
    return agent


def explain_agent(agent_id: str, language: str) -> dict[str, Any]:
    """Why the agent has its status: the deciding rule and what the last poll saw, with ages; the
    summary in the caller's language."""
    agent = get_agent(agent_id)
    now = time.time()
    report = rules.parse_hook(agent.hook_report)
    last_input = agent.last_input_at.timestamp() if agent.last_input_at else None
    quiet_s = round(now - agent.last_activity_at.timestamp(), 1)
    hook = None
    if report is not None:
        counts = last_input is None or report[1] >= last_input
        hook = {"status": report[0], "ageS": round(now - report[1], 1), "counts": counts}
    params = {
        "detail": agent.rule_detail,
        "age": hook["ageS"] if hook else "?",
        "grace": rules.STARTUP_GRACE_S,
        "settle": rules.SETTLE_S,
        "quiet": quiet_s,
    }
    with translation.override(language):
        summary = str(RULE_MESSAGES[StatusRule(agent.rule)]) % params
    return {
        "agent": serialize(agent),
        "rule": agent.rule,
        "detail": agent.rule_detail,
        "summary": summary,
        "hook": hook,
        "screenQuietS": quiet_s,
        "workingIndicator": agent.screen_indicator,
        "question": agent.screen_question,
        "foreground": agent.foreground,
        "startUpGraceS": round(max(0.0, rules.STARTUP_GRACE_S - (now - agent.created_at.timestamp())), 1),
        "lastInputAt": agent.last_input_at.isoformat() if agent.last_input_at else None,
    }


def list_agents(sandbox_id: str | None = None, statuses: list[str] | None = None) -> list[Agent]:
    agents = Agent.objects.all()
    if sandbox_id:
        agents = agents.filter(sandbox_id=sandbox_id)
    if statuses:
        agents = agents.filter(status__in=statuses)
    return list(agents)
