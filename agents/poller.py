"""The poller: every agent's status, from one exec per sandbox (agents.tmux.POLL), decided by
agents.status; the screens it keeps for agents that are gone; agent.wait, which it wakes."""

import base64
import binascii
import contextlib
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents import services, tmux, watch
from agents import status as rules
from agents.choices import AgentStatus, ExitReason, StatusRule
from agents.models import Agent, AgentProfile
from agents.pollclaims import get_claims
from agents.profiles import screen_rules
from cocoon import events
from sandboxes.choices import SandboxState
from sandboxes.drivers.base import DriverError
from sandboxes.models import Sandbox
from sandboxes.nodes import driver_of

logger = logging.getLogger(__name__)

RECHECK_S = 5  # agent.wait reads the row at least this often, should an event be lost
POLL_PARALLEL = 8  # sandboxes polled at once
POLL_TIMEOUT_S = 10  # a sandbox that cannot answer the poll in this time is asked again next tick
SCREEN_HASH = re.compile(r"[0-9a-f]{32}")
# base64 characters of a screen (or of its scrollback): tmux.TEXT_BYTES fit.
SCREEN_TEXT_MAX = (tmux.TEXT_BYTES + 2) * 4 // 3 + 4
AGENT_SESSION = re.compile(r"ag_[a-z0-9]{1,36}")
RECHECK_MARGIN_S = 0.1  # a recheck comes this much after the decision may change, never just before
CLI_SESSION = re.compile(r"[0-9a-f][0-9a-f-]{0,63}")  # what cocoon-status takes as the CLI's session id
SWEEP_GRACE_S = 60  # a session younger than this may still be getting its row
STATUS_LINES = 50  # the status patterns read the screen's last non-blank lines


def poll_all(only: str | None = None) -> int:
    """One tick of the poller: one exec per sandbox with a live agent (or only that sandbox), many
    sandboxes at once (each exec mostly waits for the engine); returns how many agents changed status.

    A sandbox still being polled by an earlier tick, in this process or another (agents.pollclaims), is
    left to it, so no agent is ever decided twice at once, and a slow sandbox holds up only itself."""
    live = _live_agents()
    if only:
        live = live.filter(sandbox_id=only)
    claims = get_claims()
    due = set(live.values_list("sandbox_id", flat=True))
    if only is None and settings.COCOON_WATCH_AGENTS:
        # Sandboxes whose watcher stream is up are polled when they give a sign, and here only as a
        # safety net; this tick also starts and ends the streams (agents.watch).
        watched = _watcher().supervise(due)
        due -= {sandbox_id for sandbox_id in watched if claims.polled_within(sandbox_id, watch.SAFETY_S)}
    return _poll_claimed(claims.claim(due), live)


def watch_sandbox(sandbox_id: str) -> None:
    """Watch the sandbox from this process from now on (its first agent was just spawned)."""
    if settings.COCOON_WATCH_AGENTS and _live_agents().filter(sandbox_id=sandbox_id).exists():
        _watcher().add(sandbox_id)


def _watcher() -> watch.Watcher:
    return watch.get_watcher(poll_signed, apply_report)


def apply_report(sandbox_id: str, agent_id: str, report: str) -> bool:
    """A hook report the watcher read on its stream, applied at once as a poll that saw it and nothing
    else new would (the poll its sign brings checks the rest). False while a poll of the sandbox is
    under way: it may have read the report files already, so the watcher tries again after it."""
    claims = get_claims()
    if not claims.claim({sandbox_id}):
        return False
    try:
        agent = _live_agents().filter(sandbox_id=sandbox_id, pk=agent_id).first()
        profile = AgentProfile.objects.filter(name=agent.profile).first() if agent else None
        if agent is not None and profile is not None:
            seen = (agent.foreground, agent.screen_hash, "", "")  # nothing but the report is new
            _observe(agent, screen_rules(profile), True, "", "", report, *seen)
    finally:
        claims.release(sandbox_id, polled=False)
    return True


def _live_agents() -> QuerySet[Agent]:
    return Agent.objects.exclude(status=AgentStatus.EXITED).filter(sandbox__state=SandboxState.RUNNING)


def poll_signed(sandbox_id: str) -> None:
    """The watcher's poll of a sandbox that gave a sign; one under way elsewhere (a tick, agent.wait)
    may have started before the sign, so the sign is given again until this poll is the one to run.
    A sandbox that still has agents keeps (or gets back) its stream."""
    live = _live_agents().filter(sandbox_id=sandbox_id)
    claimed = get_claims().claim({sandbox_id})
    if claimed:
        _poll_claimed(claimed, live)
    if live.exists():
        watcher = _watcher()
        watcher.add(sandbox_id)  # the stream that gave the sign may have ended since
        if not claimed:
            watcher.sign(sandbox_id)


def _poll_claimed(claimed: set[str], live: QuerySet[Agent]) -> int:
    if not claimed:
        return 0
    claims = get_claims()
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
                output = done.result() or ""
                boot = _boot(output)
                for agent_id, fields in _poll_fields(output, agents).items():
                    agent = agents[agent_id]
                    if agent.profile not in profiles:
                        continue
                    # One agent's hostile report must never cost the others their status.
                    try:
                        alive, *seen = fields
                        changed += _observe(agent, profiles[agent.profile], alive == "1", boot, *seen)
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
        if settings.COCOON_WATCH_AGENTS:
            with contextlib.suppress(watch.NoStream):  # its watcher stream asks the sandbox's tmux instead
                return watch.ask(sandbox_id, pairs, POLL_TIMEOUT_S)
        result = driver_of(sandbox_id).exec(
            sandbox_id, ["sh", "-c", tmux.POLL, "poll", *pairs], timeout=POLL_TIMEOUT_S
        )
    except DriverError:
        return None
    except Exception:  # one sandbox's failure must not end the tick for the others
        logger.exception("the poll of sandbox %s failed", sandbox_id)
        return None
    return result.stdout.decode(errors="replace") if result.exit_code == 0 else None


def _boot(output: str) -> str:
    """The sandbox's boot from the poll's first line; "" when it is missing or malformed."""
    first = output.split("\n", 1)[0].split("\t")
    return first[1] if len(first) == 2 and first[0] == "boot" and tmux.BOOT_VALUE.fullmatch(first[1]) else ""


def _poll_fields(output: str, agents: dict[str, Agent]) -> dict[str, list[str]]:
    """Each polled agent's fields (alive, code, hook, command, screen hash, screen, scrollback) from the
    poll script's report. Malformed lines, lines about other agents and repeats are dropped: an agent
    without a line is simply not decided this tick."""
    found: dict[str, list[str]] = {}
    for line in output.split("\n"):  # not splitlines(): it also splits at \x1c, \x85, U+2028...
        agent_id, *fields = line.split("\t")
        if len(fields) == tmux.POLL_FIELDS - 1 and agent_id in agents and agent_id not in found:
            found[agent_id] = fields
    return found


def _screen_text(encoded: str) -> str:
    """A screen (or scrollback) as the poll sent it, bounded; "" when it is not base64."""
    if len(encoded) > SCREEN_TEXT_MAX:  # keep the bottom, cut at a base64 quantum
        encoded = encoded[len(encoded) % 4 :][-SCREEN_TEXT_MAX:]
    try:
        return base64.b64decode(encoded, validate=True).decode(errors="replace")
    except (binascii.Error, ValueError):
        return ""


def split_report(hook: str) -> tuple[str, str]:
    """A hook report ("<status> <time> [<CLI session>]", as cocoon-status writes it) as the part the
    status rules read and the CLI's session id, "" for none. The session counts only in a well-formed
    report; a third field of any other form spoils the report, which the rules then ignore."""
    hook = hook.strip()
    parts = hook.split(" ")
    if len(hook) <= rules.HOOK_REPORT_MAX and len(parts) == 3 and CLI_SESSION.fullmatch(parts[2]):
        report = f"{parts[0]} {parts[1]}"
        if rules.parse_hook(report) is not None:
            return report, parts[2]
    return hook[: rules.HOOK_REPORT_MAX], ""


def _status_lines(screen: str) -> str:
    return "\n".join([line for line in screen.split("\n") if line.strip()][-STATUS_LINES:])


def _observe(
    agent: Agent,
    profile_rules: rules.ScreenRules,
    alive: bool,
    boot: str,
    code: str,
    hook: str,
    command: str,
    screen: str,
    encoded: str,
    encoded_above: str,
) -> bool:
    """Decide one agent's status from what the poll saw; save what changed, publish a new status."""
    now = timezone.now()
    facts = None
    screen = screen if SCREEN_HASH.fullmatch(screen) else ""
    fields: dict[str, Any] = {}
    if encoded:  # the screen changed: its text came along
        text = _screen_text(encoded).rstrip("\n")
        facts = rules.read_screen(profile_rules, _status_lines(text))
        if facts.timed_out:
            logger.warning("agent %s: patterns out of time count as no match: %s", agent.id, facts.timed_out)
        fields |= {
            "last_screen": text,
            "last_scrollback": _screen_text(encoded_above).rstrip("\n"),
            "screen_at": now,
        }
    memory = rules.Memory(
        status=agent.status,
        created_at=agent.created_at.timestamp(),
        last_input_at=agent.last_input_at.timestamp() if agent.last_input_at else None,
        last_change_at=agent.last_activity_at.timestamp(),
        screen=rules.ScreenFacts(agent.screen_indicator, agent.screen_question, agent.screen_error),
    )
    exit_code = rules.parse_exit_code(code)
    report, cli_session = split_report(hook)
    if cli_session:  # a report without one leaves the last known
        fields["cli_session_id"] = cli_session
    seen = rules.Observation(alive, exit_code, report, command.strip()[:100], facts)
    decision = rules.decide(profile_rules, memory, seen, now.timestamp())
    if decision.recheck_s is not None and settings.COCOON_WATCH_AGENTS:
        # Time passing gives no sign: the watcher polls again when this decision may change.
        _watcher().sign(agent.sandbox_id, after=max(decision.recheck_s, 0) + RECHECK_MARGIN_S)
    fields |= {
        "rule_detail": decision.detail[:300],
        "hook_report": seen.hook,
        "foreground": seen.command,
    }
    if screen and screen != agent.screen_hash:
        fields |= {"screen_hash": screen, "last_activity_at": now}
    if facts is not None:
        fields |= {
            "screen_indicator": facts.indicator,
            "screen_question": facts.question[:300],
            "screen_error": facts.error,
        }
    if decision.status == AgentStatus.EXITED:
        return _ended(agent, decision, boot, fields)
    before = (agent.status, agent.status_source)
    fields |= {
        "status": decision.status,
        "status_source": decision.source,
        "rule": decision.rule,
        "status_reason": decision.reason,
    }
    dirty = [name for name, value in fields.items() if getattr(agent, name) != value]
    if not dirty:  # the steady state writes nothing
        return False
    changes = {name: fields[name] for name in dirty}
    changed = (fields["status"], fields["status_source"]) != before
    if fields["status"] != agent.status:
        changes["status_at"] = now
    # A new status, or a screen that moved (its lastActivityAt): subscribers see both at once.
    with transaction.atomic():
        if not services.save_live(agent, changes):
            return False  # it ended meanwhile (a kill): what the poll saw is older
        for name, value in changes.items():
            setattr(agent, name, value)
        if changed or "last_activity_at" in dirty:
            services.publish(agent)
    return changed


def _ended(agent: Agent, decision: rules.Decision, boot: str, fields: dict[str, Any]) -> bool:
    """The agent's program is gone: why, and whether it resumes (a sandbox that restarted under it)."""
    if decision.exit_code is not None:
        reason = ExitReason.EXITED
    elif boot and agent.sandbox_boot and boot != agent.sandbox_boot:
        reason = ExitReason.ENGINE_RESTARTED
    else:
        reason = ExitReason.SESSION_VANISHED
    if reason == ExitReason.ENGINE_RESTARTED:
        for name, value in fields.items():  # what the poll saw last (its CLI session) resumes it
            setattr(agent, name, value)
        if services.resume(agent):
            return True
    with transaction.atomic():
        return services.end(agent, reason, decision.rule, exit_code=decision.exit_code, **fields)


def sweep_sessions(grace_s: float = SWEEP_GRACE_S) -> int:
    """Close agent sessions no live agent row owns, made more than grace_s ago by the sandbox's clock;
    returns how many. A spawn whose cocoond died after the session started and before its row was
    written left one (the engine finishes an exec whose client is gone); cocoond's start passes 0 when
    its embedded worker was the only spawner."""
    closed = 0
    # Pool members are left alone: nothing may run in one before it is claimed (sandboxes.pools).
    running = Sandbox.objects.claimed().filter(state=SandboxState.RUNNING)
    for sandbox_id in running.values_list("id", flat=True):
        try:
            closed += _sweep(sandbox_id, grace_s)
        except Exception:  # one sandbox's failure must not keep the others' sessions
            logger.exception("the sessions of sandbox %s could not be swept", sandbox_id)
    return closed


def _sweep(sandbox_id: str, grace_s: float) -> int:
    # The sessions first, the rows second: a spawn starts its session before it writes its row.
    now, *lines = tmux.run(sandbox_id, ["sh", "-c", tmux.SESSIONS]).split("\n")
    made = {}
    for line in lines:
        name, _, created = line.partition(" ")
        if AGENT_SESSION.fullmatch(name) and created.isdigit() and now.isdigit():
            made[name] = int(now) - int(created)
    owned = set(
        Agent.objects.filter(pk__in=made).exclude(status=AgentStatus.EXITED).values_list("id", flat=True)
    )
    orphans = [name for name, age in made.items() if name not in owned and age >= grace_s]
    for name in orphans:
        logger.warning("closing agent session %s in sandbox %s: no agent owns it", name, sandbox_id)
        tmux.run(sandbox_id, tmux.close_session(name))
    return len(orphans)


def take_last_screens(sender: Any, sandbox: Sandbox, **kwargs: Any) -> None:
    """Before cocoon stops a sandbox: its agents' screens as they are now."""
    for agent in sandbox.agents.exclude(status=AgentStatus.EXITED):
        services.keep_screen(agent)


def end_with_sandbox(sender: Any, sandbox: Sandbox, **kwargs: Any) -> None:
    """After cocoon stopped a sandbox: its agents ended with it."""
    for agent in sandbox.agents.exclude(status=AgentStatus.EXITED):
        with transaction.atomic():
            services.end(agent, ExitReason.SANDBOX_STOPPED, StatusRule.SANDBOX_STOPPED, rule_detail="")


def wait_for(agent_id: str, until: list[str], timeout_s: float) -> Agent:
    """Block until the agent reaches one of the statuses, bounded by timeout_s; the agent as last read,
    in one of `until` unless the time ran out first or it exited (it never leaves exited).

    Woken by the agent's events (the poller publishes every change). After RECHECK_S without one, and
    only if no process polled that sandbox meanwhile (no poller running: a worker without beat, tests),
    it polls the agent's sandbox itself.
    """
    deadline = time.monotonic() + timeout_s
    # Listening starts before the first read, so a change between the two is still heard.
    with events.listen(events.agent_group(agent_id)) as next_event:
        agent = services.get_agent(agent_id)
        while agent.status not in until:
            remaining = deadline - time.monotonic()
            if agent.status == AgentStatus.EXITED or remaining <= 0:
                return agent
            heard = next_event(min(remaining, RECHECK_S))
            if heard is None and not get_claims().polled_within(agent.sandbox_id, RECHECK_S):
                poll_all(only=agent.sandbox_id)
            agent = services.get_agent(agent_id)
    return agent
