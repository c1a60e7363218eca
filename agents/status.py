"""What an agent's status is, decided from one observation of the poller (SPEC §4). Pure: no I/O.

Precedence: an ended session; hook reports (only those newer than the last input, and a hook's
`working` only while the screen moves or shows the working indicator); a known question standing
still on the screen; for shells the foreground process; then the screen: the working indicator, a
start-up grace, a moving screen, and quiet — `done` after a task, `idle` before any. A turn that failed
is never `done`: the CLI's hook says `error` (Claude Code's StopFailure), or a `done` comes with a known
error standing on the screen (ERROR_SCREENS: Claude Code's "Not logged in", an "API Error:").
"""

import dataclasses
import logging
import math
import posixpath
import time
from dataclasses import dataclass

import regex

from agents.choices import AgentStatus, ErrorReason, StatusRule, StatusSource

logger = logging.getLogger(__name__)

SHELLS = {"bash", "sh", "zsh", "fish", "dash"}
SCREEN_REGION_LINES = 12  # questions and the working indicator count in the last non-empty lines only
# Everything below comes from the sandbox: bounded before any parsing, and no pattern runs unbounded
# (a profile's pattern may backtrack quadratically on a long line).
SCREEN_LINE_MAX = 1024  # characters of a screen line the patterns see
SCREEN_BUDGET_S = 0.3  # all of one screen's patterns together; a pattern out of time does not match
HOOK_REPORT_MAX = 100  # "<status> <epoch seconds>" is far shorter
EXIT_CODE_MAX = 255  # the wrapper records the shell's $?
# What cocoon-status may report: never `exited` (that is the session's to say) nor `unknown`.
HOOK_STATUSES = {
    AgentStatus.WORKING,
    AgentStatus.BLOCKED,
    AgentStatus.DONE,
    AgentStatus.IDLE,
    AgentStatus.ERROR,
}
# An `error` report may name why ("error:rate_limit"): the CLI's own word, of this form only.
HOOK_REASON = regex.compile(r"[a-z_]{1,40}")
# What the CLIs print when a turn ends on an error (the bottom lines only, like questions): a `done`
# with one of these standing on the screen is an error. Claude Code: "Invalid API key · Please run
# /login", "Not logged in · Please run /login", "Please run /login · API Error: 401 ...", "API Error:
# Request rejected (429)", "API Error: 529 ..." (its retries say "API error · Retrying", and it works
# meanwhile); Codex: "■ unexpected status 401 Unauthorized: ..." once its retries are spent (no hook
# reports that turn's end).
ERROR_SCREENS = (
    (ErrorReason.INVALID_API_KEY, regex.compile(r"Invalid API key\b|■ unexpected status 40[13]\b")),
    (ErrorReason.NOT_LOGGED_IN, regex.compile(r"Not logged in\b|Please run /login\b")),
    (ErrorReason.API_ERROR, regex.compile(r"\bAPI Error: ")),
    (ErrorReason.API_ERROR, regex.compile(r"^\s*■ .*(?:unexpected status \d{3}|error)", regex.MULTILINE)),
)
SETTLE_S = 3  # a moving screen must be still this long before working becomes done or idle
HOOK_FRESHNESS_S = 15  # a hook's `working` with a quiet screen and no indicator this long hands over
STARTUP_GRACE_S = 10  # a just-started CLI draws its first screens: no settling to idle/done yet
QUESTION_RECHECK_S = 0.5  # a question that just appeared stands still if it is still there this much later


@dataclass(frozen=True)
class ScreenRules:
    """How a profile's agent is read: hooks or not, shell-like or not, and the screen's matchers."""

    hooks: bool
    foreground: bool  # a shell: a foreground process other than the shell itself means working
    working: regex.Pattern | None
    blocked: tuple[regex.Pattern, ...]

    @classmethod
    def of(cls, command: list[str], hooks: bool, working: str, blocked: list[str]) -> "ScreenRules":
        patterns = [compile_pattern(pattern) for pattern in blocked]
        return cls(
            hooks=hooks,
            foreground=bool(command) and posixpath.basename(command[0]) in SHELLS,
            working=compile_pattern(working) if working else None,
            blocked=tuple(pattern for pattern in patterns if pattern is not None),
        )


def compile_pattern(pattern: str) -> regex.Pattern | None:
    """A profile's screen pattern in Python's `re` syntax (regex's VERSION0), or None when it does not
    compile (profiles are checked when saved; one stored before that must not stop the poller)."""
    try:
        return regex.compile(pattern, regex.VERSION0)
    except regex.error:
        logger.warning("screen pattern %r does not compile: ignored", pattern)
        return None


@dataclass(frozen=True)
class ScreenFacts:
    """What the matchers found on one screen."""

    indicator: bool = False
    question: str = ""  # the blocked pattern that matched, "" for none
    error: str = ""  # the ErrorReason of an error screen (ERROR_SCREENS) that matched, "" for none
    timed_out: tuple[str, ...] = ()  # patterns that ran out of time (counted as no match)


def screen_region(text: str) -> str:
    """The bottom of the screen, bounded: the last non-empty lines, each cut to SCREEN_LINE_MAX."""
    lines = [line[:SCREEN_LINE_MAX] for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-SCREEN_REGION_LINES:])


def read_screen(rules: ScreenRules, text: str) -> ScreenFacts:
    # Only the bottom counts: prose further up that quotes a question is not a question.
    region = screen_region(text)
    deadline = time.monotonic() + SCREEN_BUDGET_S
    timed_out: list[str] = []

    def found(pattern: regex.Pattern) -> bool:
        try:
            return bool(pattern.search(region, timeout=max(0.001, deadline - time.monotonic())))
        except TimeoutError:
            timed_out.append(pattern.pattern)
            return False

    question = next((p.pattern for p in rules.blocked if found(p)), "")
    indicator = rules.working is not None and found(rules.working)
    error = next((reason for reason, pattern in ERROR_SCREENS if found(pattern)), "")
    return ScreenFacts(indicator=indicator, question=question, error=error, timed_out=tuple(timed_out))


@dataclass(frozen=True)
class Memory:
    """What cocoon remembers of an agent between observations (times in epoch seconds)."""

    status: str
    created_at: float
    last_input_at: float | None  # a prompt at spawn counts as input: the agent has a task
    last_change_at: float  # when the screen last changed
    screen: ScreenFacts


@dataclass(frozen=True)
class Observation:
    """One poll of one agent."""

    alive: bool
    exit_code: int | None = None
    hook: str = ""  # the status file: "<status> <epoch seconds>"
    command: str = ""  # the pane's foreground command
    screen: ScreenFacts | None = None  # None: the screen did not change since the last poll


@dataclass(frozen=True)
class Decision:
    status: str
    source: str
    rule: str
    detail: str = ""  # the pattern, command or hook report the rule looked at
    exit_code: int | None = None
    reason: str = ""  # why an `error`: the hook's word or the ErrorReason of the screen
    # Seconds after which the same screen may decide otherwise (a rule that counts quiet time): the
    # watcher looks again then, as nothing in the sandbox will give a sign for time passing.
    recheck_s: float | None = None


def parse_hook(report: str) -> tuple[str, float] | None:
    """ "<status> <epoch seconds>" as cocoon-status writes it ("error:<reason>" for a failed turn): the
    status and the time; None for anything else."""
    if len(report) > HOOK_REPORT_MAX:
        return None
    token, _sep, stamp = report.strip().partition(" ")
    status, colon, reason = token.partition(":")
    if colon and (status != AgentStatus.ERROR or not HOOK_REASON.fullmatch(reason)):
        return None
    try:
        at = float(stamp)
    except ValueError:
        return None
    # nan never compares, inf always does: neither is a time.
    return (status, at) if status in HOOK_STATUSES and math.isfinite(at) and at >= 0 else None


def hook_reason(report: str) -> str:
    """What an `error` report says of why ("" if nothing): parse_hook has vouched for its form."""
    return report.strip().partition(" ")[0].partition(":")[2]


def parse_exit_code(text: str) -> int | None:
    """The wrapper's record of $?: 0-255, or None for anything else (int() of 5,000 digits raises)."""
    text = text.strip()
    if not (0 < len(text) <= 3 and text.isascii() and text.isdigit()):
        return None
    code = int(text)
    return code if code <= EXIT_CODE_MAX else None


def hook_counts(memory: Memory, report: tuple[str, float] | None) -> bool:
    """After new input only newer hook reports count."""
    return report is not None and (memory.last_input_at is None or report[1] >= memory.last_input_at)


def decide(rules: ScreenRules, memory: Memory, seen: Observation, now: float) -> Decision:
    decision = _failed(_decide(rules, memory, seen, now), seen.screen or memory.screen)
    # A question that just appeared blocks once it has stood still: look again soon.
    question = (seen.screen or memory.screen).question and seen.screen is not None
    if question and decision.status != AgentStatus.EXITED:
        recheck = min(decision.recheck_s or QUESTION_RECHECK_S, QUESTION_RECHECK_S)
        return dataclasses.replace(decision, recheck_s=recheck)
    return decision


def _failed(decision: Decision, screen: ScreenFacts) -> Decision:
    """A turn that ended on an error is no `done`: an error the hook reported, with its reason, or an
    error screen standing where a done would be."""
    if decision.status == AgentStatus.ERROR:
        return dataclasses.replace(decision, reason=hook_reason(decision.detail) or ErrorReason.API_ERROR)
    if decision.status == AgentStatus.DONE and screen.error:
        return Decision(
            AgentStatus.ERROR,
            StatusSource.HEURISTIC,
            StatusRule.ERROR_ON_SCREEN,
            screen.error,
            reason=screen.error,
        )
    return decision


def _decide(rules: ScreenRules, memory: Memory, seen: Observation, now: float) -> Decision:
    heuristic = StatusSource.HEURISTIC
    if not seen.alive:
        return Decision(AgentStatus.EXITED, heuristic, StatusRule.SESSION_ENDED, exit_code=seen.exit_code)
    screen = seen.screen or memory.screen
    quiet_s = 0.0 if seen.screen is not None else now - memory.last_change_at
    report = parse_hook(seen.hook) if rules.hooks else None
    if report is not None and hook_counts(memory, report):
        working = report[0] == AgentStatus.WORKING and not screen.indicator
        if not (working and quiet_s > HOOK_FRESHNESS_S):  # a stale `working` hands over
            recheck = HOOK_FRESHNESS_S - quiet_s if working else None
            return Decision(
                report[0], StatusSource.HOOK, StatusRule.HOOK, seen.hook.strip(), recheck_s=recheck
            )
    # A question that stands still (not prose streaming past) blocks any agent, a shell's script too.
    if screen.question and quiet_s > 0:
        return Decision(AgentStatus.BLOCKED, heuristic, StatusRule.QUESTION, screen.question)
    if rules.foreground:
        if seen.command and seen.command not in SHELLS:
            return Decision(AgentStatus.WORKING, heuristic, StatusRule.FOREGROUND_PROCESS, seen.command)
        return Decision(AgentStatus.IDLE, heuristic, StatusRule.SHELL_PROMPT, seen.command)
    if screen.indicator:
        return Decision(AgentStatus.WORKING, heuristic, StatusRule.WORKING_INDICATOR)
    has_task = memory.last_input_at is not None
    if (age := now - memory.created_at) < STARTUP_GRACE_S:
        status = AgentStatus.WORKING if has_task else AgentStatus.UNKNOWN
        return Decision(status, heuristic, StatusRule.START_UP_GRACE, recheck_s=STARTUP_GRACE_S - age)
    if seen.screen is not None:
        return Decision(AgentStatus.WORKING, heuristic, StatusRule.SCREEN_CHANGING, recheck_s=SETTLE_S)
    if memory.status == AgentStatus.WORKING and quiet_s < SETTLE_S:
        return Decision(AgentStatus.WORKING, heuristic, StatusRule.SETTLING, recheck_s=SETTLE_S - quiet_s)
    if memory.last_input_at is not None and memory.last_change_at >= memory.last_input_at:
        return Decision(AgentStatus.DONE, heuristic, StatusRule.QUIET_AFTER_TASK)
    return Decision(AgentStatus.IDLE, heuristic, StatusRule.QUIET)
