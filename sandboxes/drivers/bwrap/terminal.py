"""A terminal into a bwrap sandbox: a PTY cocoond opens itself, for a command entered into the sandbox."""

import contextlib
import os
import pty
import signal
import subprocess
import termios
from typing import Any, Protocol

from sandboxes.drivers.base import TtySession


class Enters(Protocol):
    """What a terminal needs of the driver (BwrapDriver): a command entered into the sandbox."""

    def popen(
        self, sandbox_id: str, command: list[str], env: dict[str, str], workdir: str, **kwargs: Any
    ) -> subprocess.Popen[bytes]: ...


class BwrapTty(TtySession):
    """A command inside the sandbox on a PTY that cocoond opens itself."""

    def __init__(
        self,
        driver: Enters,
        sandbox_id: str,
        command: list[str],
        env: dict[str, str],
        workdir: str,
        cols: int,
        rows: int,
    ) -> None:
        self.master, slave = pty.openpty()
        self._set_size(cols, rows, slave)
        try:
            self.process = driver.popen(
                sandbox_id,
                command,
                env,
                workdir,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,  # a process group of its own, to signal and end as one
            )
        except BaseException:
            os.close(self.master)
            raise
        finally:
            os.close(slave)

    def _set_size(self, cols: int, rows: int, fd: int | None = None) -> None:
        import fcntl
        import struct

        fcntl.ioctl(
            self.master if fd is None else fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0)
        )

    def read(self, size: int = 65536) -> bytes:
        try:
            return os.read(self.master, size)
        except OSError:
            return b""

    def write(self, data: bytes) -> int:
        try:
            return os.write(self.master, data)
        except BlockingIOError:
            return 0

    def fileno(self) -> int:
        return self.master

    def resize(self, cols: int, rows: int) -> None:
        self._set_size(cols, rows)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGWINCH)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGHUP)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        os.close(self.master)
