"""One sandbox's control-mode stream (agents.watch has the whole design): the lines tmux sends on it,
matched strictly, the panes it pauses, the hook reports it reads, and a poll asked on it (Question)."""

import binascii
import re
import secrets
import threading
from collections.abc import Callable
from typing import Protocol

from agents import tmux
from sandboxes.drivers.base import MAX_EXEC_OUTPUT, TtySession
from sandboxes.nodes import driver_of

LINE_MAX = 64 * 1024  # longer lines (a pane's output) are skipped unread up to their end
PANES_MAX = 1024  # panes paused at once; a sandbox with more has the rest sign without a pause
PANE = re.compile(rb"%[0-9]{1,9}")
WINDOW = re.compile(rb"cocoon-window (ag_[a-z0-9]{1,36}) (@[0-9]{1,9}) ([0-9]{1,4})")
EVENTS_PANE = re.compile(rb"cocoon-events (%[0-9]{1,9})")
# A hook report on the events pane as cocoon-status writes it ("<agent> <status> <epoch> [<CLI session>]"),
# after tmux's control-mode escaping (a line ends in \015\012); anything else there is only a sign.
REPORT = re.compile(
    rb"(ag_[a-z0-9]{1,36}) ((?:working|blocked|done|idle|error(?::[a-z_]{1,40})?)"
    rb" [0-9]{1,12}(?:\.[0-9]{1,9})?(?: [0-9a-f][0-9a-f-]{0,63})?)"
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


class Drops(Protocol):
    """What a stream needs of the Reader (agents.reader): to let go of it. A protocol, as the Reader
    imports this module."""

    def drop(self, watch: "SandboxWatch") -> None: ...


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
        reader: Drops,
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
