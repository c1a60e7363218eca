"""Exec and terminals: commands run in a sandbox over the engine's upgraded (hijacked) exec streams."""

import contextlib
import io
import math
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from typing import Any

from sandboxes.drivers.base import AGENT_USER, MAX_EXEC_OUTPUT, WORKSPACE, ExecResult, TtySession, object_name
from sandboxes.drivers.docker.engine import DockerEngine, sandbox_error

# How long past the in-sandbox `timeout` the driver waits before giving up on the output stream.
EXEC_GRACE_S = 5
# Docker's multiplexed stream: each frame is a header (stream, 3 zero bytes, big-endian size), then data.
FRAME_HEADER = struct.Struct(">BxxxL")
READ_CHUNK = 65536
TLS_RECORD_WAIT_S = 2


def _stream_reader(sock: Any) -> io.BufferedReader:
    """The buffered reader that parsed the headers of an upgraded (attach, exec start) response.

    The engine may send the stream's first bytes right behind its `101 UPGRADED` headers; http.client
    reads the headers through this reader, which then holds those bytes in its buffer, where a read on
    the socket (`exec_start(socket=True)`, docker-py's own `frames_iter`) never sees them: a short
    command's whole output was lost that way (docker/docker-py#3332). The SDK keeps the response on the
    socket it returns and finds the socket under this same reader (`response.raw._fp.fp.raw`).
    """
    reader: io.BufferedReader = sock._response.raw._fp.fp
    return reader


def _raw_socket(sock: Any) -> socket.socket:
    """The socket under the SDK's wrapper of an upgraded stream (over TLS it hands the TLS socket)."""
    raw: socket.socket = getattr(sock, "_sock", sock)
    return raw


def _close(sock: Any) -> None:
    """Close an upgraded stream: over TLS the response's file holds the socket open after its close."""
    sock.close()
    with contextlib.suppress(Exception):
        sock._response.close()


def _frames(reader: io.BufferedReader) -> Iterator[tuple[int, bytes]]:
    """(stream, data) pieces of a multiplexed (non-TTY) stream, up to the end of the stream."""
    while len(header := reader.read(FRAME_HEADER.size)) == FRAME_HEADER.size:
        stream, remaining = FRAME_HEADER.unpack(header)
        while remaining:
            # read1: what is buffered, else one read on the socket; never waits for more than it has.
            data = reader.read1(min(remaining, READ_CHUNK))
            if not data:
                return
            remaining -= len(data)
            yield stream, data


class DockerTty(TtySession):
    def __init__(self, api: Any, exec_id: str, sock: Any) -> None:
        self.api = api
        self.exec_id = exec_id
        self.sock = sock
        self.raw = _raw_socket(sock)
        # No timeout (the SDK leaves its request timeout on the socket): a terminal may be quiet for long,
        # and with a timeout Python waits inside a read even when the descriptor is set non-blocking.
        # Over TLS a readable descriptor may hold part of a record only, and without a timeout Python
        # would spin until the rest comes: it waits for it a moment, then the session counts as over.
        self.raw.settimeout(TLS_RECORD_WAIT_S if isinstance(self.raw, ssl.SSLSocket) else None)
        # What the shell printed first may have come in with the response headers (see _stream_reader).
        self.reader = _stream_reader(sock)

    def read(self, size: int = 65536) -> bytes:
        try:
            return self.reader.read1(size)
        except OSError:
            return b""

    def write(self, data: bytes) -> int:
        try:
            return self.raw.send(data)
        except (BlockingIOError, TimeoutError):
            return 0

    def resize(self, cols: int, rows: int) -> None:
        self.api.exec_resize(self.exec_id, height=rows, width=cols)

    def close(self) -> None:
        _close(self.sock)

    def fileno(self) -> int:
        return self.raw.fileno()

    def take_buffered(self) -> bytes:
        # What came in with the response headers (see _stream_reader). A read1 of READ_CHUNK hands over the
        # whole buffer and reads on the socket only past it, so afterwards the socket tells all.
        timeout = self.raw.gettimeout()
        self.raw.settimeout(0)
        try:
            return self.reader.read1(READ_CHUNK)  # b"" when the socket has nothing: it would block
        except OSError:
            return b""
        finally:
            self.raw.settimeout(timeout)


class DockerExec(DockerEngine):
    def exec(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        user: str = AGENT_USER,
        workdir: str = WORKSPACE,
        timeout: float = 60,
    ) -> ExecResult:
        return self._exec(
            self._container_name(sandbox_id), command, stdin=stdin, env=env, user=user, workdir=workdir,
            timeout=timeout,
        )  # fmt: skip

    def exec_service(
        self, name: str, command: list[str], *, stdin: bytes | None = None, timeout: float = 60
    ) -> ExecResult:
        return self._exec(
            object_name(name), command, stdin=stdin, env=None, user="", workdir="/", timeout=timeout
        )

    def _exec(
        self,
        container: str,
        command: list[str],
        *,
        stdin: bytes | None,
        env: dict[str, str] | None,
        user: str,
        workdir: str,
        timeout: float,
    ) -> ExecResult:
        api = self._client.api
        # `timeout` inside the container kills the command; the socket deadline below is the backstop.
        limit = max(1, math.ceil(timeout))
        if stdin is not None and self._client.api.base_url.startswith("https"):
            # A TLS stream cannot be half-closed (Python drops its TLS layer with the write side), so
            # the end of stdin is not said: the command reads exactly its length instead.
            command = ["sh", "-c", 'head -c "$0" | "$@"', str(len(stdin)), *command]
        wrapped = ["timeout", "-k", "2", str(limit), *command]
        started = time.monotonic()
        try:
            exec_id = api.exec_create(
                container,
                wrapped,
                stdin=stdin is not None,
                environment=env or {},
                workdir=workdir,
                user=user,
            )["Id"]
            # Any: the socket's wrapper, whose private parts (_sock, _response) the stream is read from.
            sock: Any = api.exec_start(exec_id, socket=True)
        except Exception as error:
            raise sandbox_error(error) from error
        raw = _raw_socket(sock)
        raw.settimeout(limit + EXEC_GRACE_S)
        output = {1: bytearray(), 2: bytearray()}
        truncated = False
        try:
            if stdin is not None:
                raw.sendall(stdin)
                if not isinstance(raw, ssl.SSLSocket):
                    raw.shutdown(socket.SHUT_WR)
            for stream, data in _frames(_stream_reader(sock)):
                buffer = output.get(stream)
                if buffer is None:
                    continue
                room = MAX_EXEC_OUTPUT - len(buffer)
                if len(data) > room:
                    truncated = True
                buffer += data[: max(room, 0)]
        except TimeoutError:
            return ExecResult(-1, bytes(output[1]), bytes(output[2]), timed_out=True, truncated=truncated)
        finally:
            _close(sock)
        exit_code = api.exec_inspect(exec_id)["ExitCode"]
        timed_out = exit_code in {124, 137} and time.monotonic() - started >= limit
        return ExecResult(
            exit_code, bytes(output[1]), bytes(output[2]), timed_out=timed_out, truncated=truncated
        )

    def open_tty(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        cols: int = 80,
        rows: int = 24,
        env: dict[str, str] | None = None,
        user: str = AGENT_USER,
        workdir: str = WORKSPACE,
    ) -> TtySession:
        api = self._client.api
        try:
            exec_id = api.exec_create(
                self._container_name(sandbox_id),
                command,
                stdin=True,
                tty=True,
                environment={"TERM": "xterm-256color", **(env or {})},
                workdir=workdir,
                user=user,
            )["Id"]
            sock = api.exec_start(exec_id, socket=True, tty=True)
            api.exec_resize(exec_id, height=rows, width=cols)
        except Exception as error:
            raise sandbox_error(error) from error
        return DockerTty(api, exec_id, sock)
