"""The one thread that reads every control-mode stream of this process (agents.watch has the design)."""

import contextlib
import logging
import os
import selectors
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from agents.stream import SandboxWatch

logger = logging.getLogger(__name__)

READ_MAX = 64 * 1024  # read from one stream per round of the Reader


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
