"""What an exec in a bwrap sandbox writes, read with a bound and a deadline."""

import contextlib
import os
import selectors
import subprocess
import threading
import time

from sandboxes.drivers.base import MAX_EXEC_OUTPUT


def bounded_communicate(
    process: subprocess.Popen[bytes], stdin: bytes | None, timeout: float
) -> tuple[bytes, bytes, bool, bool]:
    """stdout and stderr of a process in a sandbox, each cut at MAX_EXEC_OUTPUT (the rest is read and
    dropped), whether anything was cut, and whether it ended before the deadline (else it is killed)."""
    stdin_pipe, stdout, stderr = process.stdin, process.stdout, process.stderr
    if stdin_pipe is None or stdout is None or stderr is None:
        raise ValueError("the process needs pipes for stdin, stdout and stderr")

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            stdin_pipe.write(stdin or b"")
        with contextlib.suppress(BrokenPipeError, OSError):
            stdin_pipe.close()

    threading.Thread(target=feed, daemon=True).start()
    output = {stdout: bytearray(), stderr: bytearray()}
    truncated = False
    streams = selectors.DefaultSelector()
    for stream in output:
        os.set_blocking(stream.fileno(), False)
        streams.register(stream, selectors.EVENT_READ, output[stream])
    deadline = time.monotonic() + timeout
    while streams.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        for key, _ in streams.select(remaining):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                streams.unregister(key.fileobj)
                continue
            buffer = key.data
            room = MAX_EXEC_OUTPUT - len(buffer)
            truncated |= len(chunk) > room
            buffer += chunk[: max(room, 0)]
    streams.close()
    try:
        process.wait(max(0.0, deadline - time.monotonic()))
        finished = True
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        finished = False
    for stream in output:
        stream.close()
    return bytes(output[stdout]), bytes(output[stderr]), truncated, finished
