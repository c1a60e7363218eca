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
"""

import binascii
import contextlib
import logging
import os
import re
import secrets
import selectors
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from agents import tmux
from agents.pollclaims import get_claims
from sandboxes.drivers.base import MAX_EXEC_OUTPUT, TtySession
from sandboxes.nodes import driver_of

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
LINE_MAX = 64 * 1024  # longer lines (a pane's output) are skipped unread up to their end
PANES_MAX = 1024  # panes paused at once; a sandbox with more has the rest sign without a pause
POLL_PARALLEL = 8
OPEN_PARALLEL = 4  # streams opened at once (engine round trips), e.g. for every sandbox after a restart
REPORT_RETRY_S = 0.05  # reports that found their sandbox being polled are tried again this much later
REPORT_RETRIES = 40
READ_MAX = 64 * 1024  # read from one stream per round of the Reader
PANE = re.compile(rb"%[0-9]{1,9}")
WINDOW = re.compile(rb"cocoon-window (ag_[a-z0-9]{1,36}) (@[0-9]{1,9}) ([0-9]{1,4})")
EVENTS_PANE = re.compile(rb"cocoon-events (%[0-9]{1,9})")
# A hook report on the events pane as cocoon-status writes it ("<agent> <status> <epoch> [<CLI session>]"),
# after tmux's control-mode escaping (a line ends in \015\012); anything else there is only a sign.
REPORT = re.compile(
    rb"(ag_[a-z0-9]{1,36}) ((?:working|blocked|done|idle) [0-9]{1,12}(?:\.[0-9]{1,9})?"
    rb"(?: [0-9a-f][0-9a-f-]{0,63})?)"
)
REPORTS_MAX = 16  # reports taken from one %output line
ANSWER_MAX = (MAX_EXEC_OUTPUT // 3 + 1) * 4  # base64 characters of a poll's report: as much as an exec's
BASE64_LINE = re.compile(rb"[A-Za-z0-9+/=]{1,76}")  # as base64 writes them
# Notifications that mean: look at this sandbox's agents again.
SIGNS = {
    b"%window-renamed",  # a foreground program changed (automatic-rename)
    b"%window-close",
    b"%unlinked-window-close",
    b"%pane-mode-changed",
}
# ... and that the set of windows changed: link new agent windows into the watch session.
RELINK = {b"%sessions-changed", b"%unlinked-window-add", b"%window-add"}


class NoStream(Exception):
    """This process has no stream of the sandbox up: its poll is an exec."""


class Question:
    """A poll asked on the stream, and its answer (tmux.stream_poll) as its lines come: base64 lines
    between two marker lines, bounded; anything else there makes it a failed poll."""

    def __init__(self) -> None:
        self.nonce = secrets.token_hex(8)
        self._first = f"{tmux.POLL_MARK} {self.nonce}".encode()
        self._last = f"{tmux.POLL_MARK}-end {self.nonce}".encode()
        self._lines: list[bytes] = []
        self._size = 0
        self._started = False
        self._failed = False
        self.answer: str | None = None
        self.done = threading.Event()

    def take(self, line: bytes) -> bool:
        """Whether the line is the answer's (taken here), not the stream's."""
        if self.done.is_set():  # what follows the answer is the stream's again
            return False
        if not self._started:
            self._started = line == self._first
            return self._started
        if line == self._last:
            if not self._failed:
                try:
                    report = binascii.a2b_base64(b"".join(self._lines), strict_mode=True)
                    self.answer = report.decode(errors="replace")
                except binascii.Error:
                    pass
            self._lines = []
            self.done.set()
        elif not self._failed:
            self._size += len(line)
            self._failed = self._size > ANSWER_MAX or not BASE64_LINE.fullmatch(line)
            if self._failed:
                self._lines = []  # the rest, up to the last marker, is read and dropped
            else:
                self._lines.append(line)
        return True

    def end(self) -> None:
        """The stream ended before the answer did: a failed poll."""
        self.done.set()


class SandboxWatch:
    """One sandbox's control-mode stream: opened by a pool thread, then read by the Reader with the rest.

    Its descriptor is non-blocking, so neither a read nor a write ever waits on the sandbox: a sandbox that
    stops reading its control client has a write fail, and its stream is closed (and opened again later),
    rather than stalling the thread that serves every stream.
    """

    def __init__(
        self,
        sandbox_id: str,
        on_sign: Callable[[str, bool], None],
        on_report: Callable[[str, str, str], None],
        on_end: Callable[[str], None],
        reader: "Reader",
    ) -> None:
        self.sandbox_id = sandbox_id
        self._on_sign = on_sign
        self._on_report = on_report
        self._on_end = on_end
        self._reader = reader
        self._lock = threading.Lock()  # the paused panes, and one writer at a time
        self._asking = threading.Lock()  # one poll at a time on the stream
        self._question: Question | None = None
        self._paused: set[bytes] = set()
        self.tty: TtySession | None = None
        self.fd = -1  # the descriptor the Reader selects on, once it does
        self._events_pane = b""  # the pane that reads the events FIFO: its output is urgent
        self._pending = b""  # the start of a line whose end has not come yet
        self._skipping = False  # the rest of an overlong line, dropped up to its newline
        self.closed = False  # by the watcher: the sandbox needs no stream (or another process has it)
        self.unanswered = False  # a poll asked on it had no answer in time
        self.exited = False  # by tmux
        self.ended = False
        self.connected = threading.Event()

    def open(self) -> None:
        """Start tmux's control client in the sandbox (blocking: engine round trips)."""
        self.tty = driver_of(self.sandbox_id).open_tty(self.sandbox_id, ["sh", "-c", tmux.WATCH])
        self._send(tmux.WINDOWS.encode())
        self._send(tmux.EVENTS_PANE.encode())

    def close(self) -> None:
        """The watcher needs this stream no more."""
        self.closed = True
        self._reader.drop(self)

    def end(self) -> None:
        """The stream is over (called once, by the Reader or the opener): unless the watcher closed it, a
        poll follows after a pause, which opens a new stream if it is still wanted."""
        self.ended = True
        question = self._question
        if question is not None:
            question.end()
        if not self.closed:
            self._on_end(self.sandbox_id)

    def up(self) -> bool:
        return self.connected.is_set() and not (self.ended or self.exited or self.closed)

    def ask(self, pairs: list[str], timeout: float) -> str | None:
        """The poll script's report on these "<agent>=<screen hash>" pairs (agents.tmux.stream_poll),
        asked on the stream; None when it could not answer (a stream that does not answer in time is
        closed and opened again)."""
        with self._asking:
            question = self._question = Question()
            try:
                self._send(tmux.stream_poll(question.nonce, pairs))
                if self.ended or self.exited:
                    return None
                if not question.done.wait(timeout):
                    self.unanswered = True
                    self._break()  # its control client waits for the poll: it would answer nothing more
                return question.answer
            finally:
                self._question = None

    def resume(self) -> None:
        """Let tmux send the paused panes' output again (before their sandbox is polled)."""
        with self._lock:
            panes, self._paused = self._paused, set()
        for pane in panes:
            self._send(b"refresh-client -A '" + pane + b":continue'")

    def _send(self, command: bytes) -> None:
        tty = self.tty
        if tty is None or self.exited:
            return
        line = command + b"\n"
        try:
            with self._lock:
                complete = tty.write(line) == len(line)
        except OSError:
            complete = False
        if not complete:  # broken, or the sandbox does not read
            self._break()

    def _break(self) -> None:
        """The stream is of no more use: it ends, and a new one is opened."""
        self.exited = True
        self._reader.drop(self)

    def feed(self, data: bytes) -> None:
        """Output of the stream, in whatever pieces it came."""
        pending = self._pending + data
        while True:
            line, found, rest = pending.partition(b"\n")
            if not found:
                break
            pending = rest
            if not self._skipping:
                self._line(line.rstrip(b"\r"))
            self._skipping = False
        if len(pending) > LINE_MAX:
            pending, self._skipping = b"", True
        self._pending = pending

    def _line(self, line: bytes) -> None:
        question = self._question
        if question is not None and question.take(line):
            return
        kind, _, rest = line.partition(b" ")
        if kind in {b"%output", b"%extended-output", b"%pause"}:
            pane = rest.split(b" ", 1)[0]
            if PANE.fullmatch(pane):
                events = pane == self._events_pane
                if events and kind != b"%pause":
                    # %extended-output (pause-after is on) has the age and more before " : ".
                    value = rest.partition(b" : " if kind == b"%extended-output" else b" ")[2]
                    self._reports(value)
                # Paused like the rest: a flood of reports costs one line per poll, not a stream.
                self._pause(pane, already=kind == b"%pause")
                self._on_sign(self.sandbox_id, events)
        elif kind in SIGNS:
            self._on_sign(self.sandbox_id, True)
        elif kind in RELINK:
            self._send(tmux.WINDOWS.encode())
            self._on_sign(self.sandbox_id, True)
        elif kind == b"%session-changed":
            # Connected: what happened while no stream was up (a restart, another process's lease) is
            # read now, not at the next safety poll: the stream that ended may not have said so.
            self.connected.set()
            self._on_sign(self.sandbox_id, True)
        elif kind == b"%exit":
            self.exited = True
        elif kind == b"cocoon-events":
            found = EVENTS_PANE.fullmatch(line)
            if found:
                self._events_pane = found[1]
        elif kind == b"cocoon-window":
            found = WINDOW.fullmatch(line)
            if found and found[3] == b"1":  # an agent's window linked into its own session only
                self._send(b"link-window -d -s " + found[2] + b" -t =" + tmux.WATCH_SESSION.encode() + b":")

    def _reports(self, output: bytes) -> None:
        """The hook reports in the output of the events pane: applied at once (agents.poller)."""
        text = output.replace(b"\\015", b"")
        for line in text.split(b"\\012")[:REPORTS_MAX]:
            found = REPORT.fullmatch(line)
            if found:
                self._on_report(self.sandbox_id, found[1].decode(), found[2].decode())

    def _pause(self, pane: bytes, already: bool) -> None:
        with self._lock:
            if pane in self._paused or len(self._paused) >= PANES_MAX:
                return
            self._paused.add(pane)
        if not already:
            self._send(b"refresh-client -A '" + pane + b":pause'")


class Reader:
    """One thread that reads every stream of this process, through a selector on their descriptors: a
    stream costs a registration, not a thread, and each ready stream gets one bounded read per round, so
    a busy sandbox cannot hold up another's. Streams end here too, their descriptors closed by a pool
    thread (closing a bwrap terminal waits for its process)."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._added: list[SandboxWatch] = []
        self._dropped: list[SandboxWatch] = []
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._closer = ThreadPoolExecutor(2, thread_name_prefix="watch-close")
        threading.Thread(target=self._run, name="watch-read", daemon=True).start()

    def add(self, watch: SandboxWatch) -> None:
        with self._lock:
            self._added.append(watch)
        self._wake()

    def drop(self, watch: SandboxWatch) -> None:
        with self._lock:
            self._dropped.append(watch)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # full: a wake is pending anyway
            os.write(self._wake_write, b".")

    def _run(self) -> None:
        while True:
            try:
                for key, _events in self._selector.select():
                    if key.data is None:
                        self._changes()
                    else:
                        self._serve(key.data)
            except Exception:  # a defect here must not end every stream's reading
                logger.exception("the watch reader failed a round")
                time.sleep(0.1)

    def _changes(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake_read, 4096)
        with self._lock:
            added, self._added = self._added, []
            dropped, self._dropped = self._dropped, []
        for watch in added:
            assert watch.tty is not None
            try:
                buffered = watch.tty.take_buffered()
                os.set_blocking(watch.tty.fileno(), False)
                self._selector.register(watch.tty.fileno(), selectors.EVENT_READ, watch)
                watch.fd = watch.tty.fileno()
            except (OSError, ValueError):  # it broke meanwhile
                self._end(watch)
                continue
            if buffered:
                watch.feed(buffered)
            if watch.closed or watch.exited:
                self._end(watch)
        for watch in dropped:
            self._end(watch)

    def _serve(self, watch: SandboxWatch) -> None:
        assert watch.tty is not None
        data = watch.tty.read(READ_MAX)
        if data:
            try:
                watch.feed(data)
            except Exception:
                logger.exception("the watch stream of sandbox %s failed", watch.sandbox_id)
                data = b""
        if not data or watch.closed or watch.exited:
            self._end(watch)

    def _end(self, watch: SandboxWatch) -> None:
        if watch.ended:
            return
        if watch.fd >= 0:
            self._selector.unregister(watch.fd)
        if watch.tty is not None:
            self._closer.submit(watch.tty.close)
        watch.end()


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
