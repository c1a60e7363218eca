"""The watcher: status pushed by the sandboxes instead of polled every tick.

One long-lived stream per sandbox with live agents: tmux's control mode inside the sandbox (agents.tmux
WATCH), reached through the driver's terminal, so it works wherever attach works (Docker, Podman, bwrap
inside the sandbox's namespaces, gVisor) and adds no program to the image. tmux tells it the moment an
agent's pane prints (%output), a hook report or an exit is recorded (the events pane prints), a
foreground program changes (%window-renamed) or a session comes or goes. Of what agents print it reads
nothing: it pauses that pane (so a busy agent costs one line, not a byte stream) and asks the
dispatcher for a poll of the sandbox, which decides as before (agents.poller, agents.status) and
continues the paused panes first, so nothing printed in between is missed. Hook reports on the events
pane it does read, and has applied at once (agents.poller.apply_report), before that poll. The polls
themselves go over the stream too (ask): the sandbox's tmux server runs the poll script, so a poll costs
a fork in the sandbox, not an engine exec.

One thread reads all streams (Reader: a selector over their descriptors, one bounded read per ready
stream and round), and none of it blocks on a sandbox: descriptors are non-blocking, and opening a
stream (engine round trips) and closing one happen in small pools. So 200 sandboxes cost one thread and
200 descriptors, not 200 threads.

Everything on the stream is the sandbox's, so hostile: lines are bounded and matched strictly, anything
else is ignored; a flood of notifications costs at most one poll per MIN_GAP_S of that sandbox; a
sandbox that stops reading its control client loses its stream (a write would block), not the Reader.
The periodic poll stays as the safety net, for sandboxes whose stream is down and once every SAFETY_S
for the others.

A stream is agents.stream's, the thread that reads them agents.reader's; here are the signs' polls and
the streams' leases.
"""

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from agents.pollclaims import get_claims
from agents.reader import Reader
from agents.stream import REPORTS_MAX, SandboxWatch

logger = logging.getLogger(__name__)

COALESCE_S = 0.05  # a poll waits this long after the first sign, so one burst of output is one poll
MIN_GAP_S = 0.25  # and a sandbox is polled at most this often, however much happens in it
# An agent that prints on right after each poll has its sandbox polled ever less often, down to once
# per OUTPUT_GAP_MAX_S (the old tick): its screen is busy, not news. Hook reports, exits and changed
# foreground programs are always polled after MIN_GAP_S.
OUTPUT_GAP_MAX_S = 2.0
SAFETY_S = 60  # a watched sandbox is still polled this often, should a sign have been lost
RENEW_S = 10  # how often this process renews its watch leases (agents.pollclaims.WATCH_TTL_S)
RETRY_S = 5  # a stream that ended by itself is opened again after this long (the tick covers it meanwhile)
# A sandbox whose tmux left a poll on its stream unanswered (its own doing: it can make run-shell hang) is
# polled by exec for this long, rather than hold a poll thread for the poll's timeout on every new stream.
UNANSWERED_EXEC_S = 600
POLL_PARALLEL = 8
OPEN_PARALLEL = 4  # streams opened at once (engine round trips), e.g. for every sandbox after a restart
REPORT_RETRY_S = 0.05  # reports that found their sandbox being polled are tried again this much later
REPORT_RETRIES = 40


class NoStream(Exception):
    """This process has no stream of the sandbox up: its poll is an exec."""


class Watcher:
    """Every watched sandbox of this process, and the dispatcher that turns their signs into polls."""

    def __init__(self, poll: Callable[[str], object], apply: Callable[[str, str, str], bool]) -> None:
        self._poll = poll
        self._apply = apply
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watches: dict[str, SandboxWatch] = {}
        self._due: dict[str, float] = {}  # sandbox -> when its poll may start
        self._last: dict[str, float] = {}  # sandbox -> when its last poll started
        self._gap: dict[str, float] = {}  # sandbox -> how long after its last poll output may poll it
        self._exec_until: dict[str, float] = {}  # sandbox -> until when its polls are execs (monotonic)
        self._output_due: set[str] = set()  # sandboxes whose coming poll only output asked for
        self._output_polled: set[str] = set()  # ... and whose last poll was such a one
        self._reports: dict[str, dict[str, str]] = {}  # sandbox -> agent -> hook report not yet applied
        self._report_due: dict[str, float] = {}  # sandbox -> when its reports are tried again
        self._retries: dict[str, int] = {}  # sandbox -> how often its reports found it busy
        self._running: set[str] = set()
        self._pool = ThreadPoolExecutor(POLL_PARALLEL, thread_name_prefix="watch-poll")
        self._opener = ThreadPoolExecutor(OPEN_PARALLEL, thread_name_prefix="watch-open")
        self._reader = Reader()
        self._dispatcher = threading.Thread(target=self._dispatch, name="watch-dispatch", daemon=True)
        self._dispatcher.start()

    def supervise(self, sandbox_ids: Iterable[str]) -> set[str]:
        """Watch exactly these sandboxes (those with live agents) from this process, where no other
        process already does; returns those whose stream is up here or elsewhere."""
        wanted = set(sandbox_ids)
        claims = get_claims()
        with self._lock:
            for sandbox_id in list(self._watches):
                watch = self._watches[sandbox_id]
                # Gone, or ended (by itself, or closed by _renew when another process took its lease).
                if sandbox_id not in wanted or watch.ended:
                    watch.close()
                    del self._watches[sandbox_id]
                    claims.unwatch(sandbox_id)
            for sandbox_id in wanted - set(self._watches):
                if claims.watch(sandbox_id):
                    self._start(sandbox_id)
            self._last = {key: value for key, value in self._last.items() if key in wanted}
            self._gap = {key: value for key, value in self._gap.items() if key in wanted}
            self._exec_until = {key: value for key, value in self._exec_until.items() if key in wanted}
            self._output_due &= wanted
            self._output_polled &= wanted
            here = {sandbox_id for sandbox_id, watch in self._watches.items() if watch.connected.is_set()}
        return here | {sandbox_id for sandbox_id in wanted - here if claims.watched_elsewhere(sandbox_id)}

    def ask(self, sandbox_id: str, pairs: list[str], timeout: float) -> str | None:
        """The poll of the sandbox, asked on its stream (SandboxWatch.ask); NoStream when it has none up
        in this process, or left one unanswered less than UNANSWERED_EXEC_S ago."""
        with self._lock:
            watch = self._watches.get(sandbox_id)
            exec_only = time.monotonic() < self._exec_until.get(sandbox_id, 0)
        if watch is None or exec_only or not watch.up():
            raise NoStream(sandbox_id)
        answer = watch.ask(pairs, timeout)
        if watch.unanswered:
            with self._lock:
                self._exec_until[sandbox_id] = time.monotonic() + UNANSWERED_EXEC_S
        return answer

    def add(self, sandbox_id: str) -> None:
        """Watch the sandbox, unless a stream of this or another process does already."""
        with self._lock:
            watch = self._watches.get(sandbox_id)
            if (watch is None or watch.ended) and get_claims().watch(sandbox_id):
                self._start(sandbox_id)

    def _start(self, sandbox_id: str) -> None:
        watch = SandboxWatch(sandbox_id, self.sign, self.report, self._ended, self._reader)
        self._watches[sandbox_id] = watch
        self._opener.submit(self._open, watch)

    def _open(self, watch: SandboxWatch) -> None:
        try:
            watch.open()
        except Exception:  # a sandbox that went away, an engine restart
            logger.info("the watch of sandbox %s could not start", watch.sandbox_id, exc_info=True)
            watch.end()
        else:
            self._reader.add(watch)

    def _ended(self, sandbox_id: str) -> None:
        """A stream ended by itself: after a pause, a poll, which opens a new one if still wanted (the
        tick covers the sandbox meanwhile)."""
        logger.info("the watch of sandbox %s ended", sandbox_id)
        self.sign(sandbox_id, after=RETRY_S)

    def sign(self, sandbox_id: str, urgent: bool = True, after: float = COALESCE_S) -> None:
        """Something happened in the sandbox: poll it soon (after `after`), once for a burst. urgent (a
        hook report, an exit, a new foreground program): at most MIN_GAP_S after its last poll; output:
        after a gap that grows while the sandbox prints on right after each poll."""
        with self._lock:
            now, last = time.monotonic(), self._last.get(sandbox_id, float("-inf"))
            coming = self._due.get(sandbox_id, float("inf"))
            if urgent:
                gap = MIN_GAP_S
                self._output_due.discard(sandbox_id)  # the coming poll is no longer output's alone
            elif sandbox_id in self._output_due:
                return  # output's poll is coming
            else:
                # The gap grows only while output follows polls that output asked for: a poll for a
                # hook, an exit or time passing (a recheck) says nothing of a busy screen.
                gap = self._gap.get(sandbox_id, MIN_GAP_S)
                busy = sandbox_id in self._output_polled and now - last < 2 * gap
                gap = min(gap * 2, OUTPUT_GAP_MAX_S) if busy else MIN_GAP_S
            due = max(now + after, last + gap)
            # A poll coming sooner reads the screen too; one coming later (a recheck seconds away) must
            # not hold this up: output once waited for it, the 2.5-3.3 s outliers of screen -> event.
            if due >= coming:
                return
            if not urgent:
                self._gap[sandbox_id] = gap
                self._output_due.add(sandbox_id)
            self._due[sandbox_id] = due
            self._wake.notify()

    def report(self, sandbox_id: str, agent_id: str, report: str) -> None:
        """A hook report from the stream: applied now, without a poll (the urgent sign's poll follows).
        Each agent's latest only, and one job per sandbox at a time."""
        with self._lock:
            queued = sandbox_id in self._reports  # its job is queued and takes this one too
            pending = self._reports.setdefault(sandbox_id, {})
            if agent_id in pending or len(pending) < REPORTS_MAX:
                pending[agent_id] = report
            self._retries.pop(sandbox_id, None)  # news: the count starts again
        if not queued:
            self._pool.submit(self._apply_reports, sandbox_id)

    def _apply_reports(self, sandbox_id: str) -> None:
        with self._lock:
            pending = self._reports.pop(sandbox_id, {})
            self._report_due.pop(sandbox_id, None)
        busy = {}
        for agent_id, report in pending.items():
            try:
                if not self._apply(sandbox_id, agent_id, report):
                    busy[agent_id] = report
            except Exception:
                logger.exception("the hook report of agent %s could not be applied", agent_id)
        if not busy:
            return
        # A poll of the sandbox holds it, which may have read the report files before this one was
        # written: tried again right after, a few times (then the sign's poll reads it from its file).
        with self._lock:
            newer = self._reports.get(sandbox_id)
            if newer is not None:  # a queued job takes these too; a newer report of an agent wins
                for agent_id, report in busy.items():
                    newer.setdefault(agent_id, report)
                return
            tries = self._retries.get(sandbox_id, 0) + 1
            if tries > REPORT_RETRIES:
                self._retries.pop(sandbox_id, None)
                return
            self._retries[sandbox_id] = tries
            self._reports[sandbox_id] = busy
            self._report_due[sandbox_id] = time.monotonic() + REPORT_RETRY_S
            self._wake.notify()

    def _dispatch(self) -> None:
        renewed = time.monotonic()
        while True:
            if time.monotonic() - renewed > RENEW_S:
                self._renew()
                renewed = time.monotonic()
            with self._lock:
                now = time.monotonic()
                ready = [s for s, due in self._due.items() if due <= now and s not in self._running]
                retry = [s for s, due in self._report_due.items() if due <= now]
                if not (ready or retry):
                    later = [due - now for s, due in self._due.items() if s not in self._running]
                    self._wake.wait(min([*later, *(due - now for due in self._report_due.values()), RENEW_S]))
                    continue
                for sandbox_id in ready:
                    del self._due[sandbox_id]
                    self._running.add(sandbox_id)
                    self._last[sandbox_id] = now
                    if sandbox_id in self._output_due:
                        self._output_due.discard(sandbox_id)
                        self._output_polled.add(sandbox_id)
                    else:
                        self._output_polled.discard(sandbox_id)
                for sandbox_id in retry:
                    del self._report_due[sandbox_id]
            for sandbox_id in ready:
                self._pool.submit(self._poll_one, sandbox_id)
            for sandbox_id in retry:
                self._pool.submit(self._apply_reports, sandbox_id)

    def _renew(self) -> None:
        """Keep this process's leases; a stream whose lease another process took (after this one missed
        its renewals) is closed, and the next tick forgets it."""
        claims = get_claims()
        with self._lock:
            watches = list(self._watches.values())
        for watch in watches:
            try:
                if not claims.watch(watch.sandbox_id):
                    watch.close()
            except Exception:  # Redis away: the leases expire, the streams stay until it is back
                logger.warning("could not renew the watch of sandbox %s", watch.sandbox_id, exc_info=True)

    def _poll_one(self, sandbox_id: str) -> None:
        try:
            with self._lock:
                watch = self._watches.get(sandbox_id)
            if watch is not None:
                watch.resume()  # first: output from now on is a new sign, so none is missed
            self._poll(sandbox_id)
        except Exception:
            logger.exception("the poll of sandbox %s after a sign failed", sandbox_id)
        finally:
            with self._lock:
                self._running.discard(sandbox_id)
                if sandbox_id in self._due:
                    self._wake.notify()


_watcher: Watcher | None = None
_watcher_lock = threading.Lock()


def ask(sandbox_id: str, pairs: list[str], timeout: float) -> str | None:
    """The poll of the sandbox on this process's stream of it (Watcher.ask), without starting a watcher."""
    if _watcher is None:
        raise NoStream(sandbox_id)
    return _watcher.ask(sandbox_id, pairs, timeout)


def get_watcher(poll: Callable[[str], object], apply: Callable[[str, str, str], bool]) -> Watcher:
    global _watcher
    with _watcher_lock:
        if _watcher is None:
            _watcher = Watcher(poll, apply)
        return _watcher
