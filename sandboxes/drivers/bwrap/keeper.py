"""The keeper: bwrap's PID 1 of a sandbox, named for good by its host PID and start time.

Its record lives in the sandbox's folder, out of the sandbox's reach; a PID that no longer has the
recorded start time belongs to some other process, and is never signalled or entered.
"""

import contextlib
import io
import json
import os
import selectors
import signal
import time
from pathlib import Path
from typing import Any

from sandboxes.drivers.base import DriverError

START_TIMEOUT_S = 10
POLL_S = 0.02
KEEPER = "keeper.json"  # the keeper's host PID and start time, in the folder no sandbox can see


def read_pid(folder: Path) -> int | None:
    """The host PID of the sandbox's PID 1, if that very process still runs (not a reused PID)."""
    try:
        record = json.loads((folder / KEEPER).read_text())
        pid = int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if start_time(pid) == record.get("start") else None


def record(folder: Path, pid: int) -> None:
    """Keep pid, with its start time, as the sandbox's keeper (replaced whole, never half written)."""
    written = json.dumps({"pid": pid, "start": start_time(pid)})
    (folder / f"{KEEPER}.tmp").write_text(written)
    (folder / f"{KEEPER}.tmp").rename(folder / KEEPER)


def kill(folder: Path) -> None:
    """End every process of the sandbox: killing a PID namespace's PID 1 ends all of them."""
    pid = read_pid(folder)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot: with the PID, it names one process for good."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_line.rsplit(")", 1)[-1].split()[19]  # field 22; the name before ")" may hold spaces


def wait_started(pipe: io.BufferedReader, log: Any) -> int:
    """The PID bwrap reports on its info pipe, once the sandbox is set up (its PID 1 has a child)."""
    ready = selectors.DefaultSelector()
    ready.register(pipe, selectors.EVENT_READ)
    if not ready.select(START_TIMEOUT_S):
        raise DriverError(f"the keeper did not start: {log()}")
    try:
        pid = int(json.loads(pipe.read(4096))["child-pid"])
    except (ValueError, KeyError, TypeError) as error:
        raise DriverError(f"the keeper did not start: {log()}") from error
    deadline = time.monotonic() + START_TIMEOUT_S
    while not Path(f"/proc/{pid}/task/{pid}/children").read_text().strip():
        if time.monotonic() > deadline:
            raise DriverError(f"the keeper did not start: {log()}")
        time.sleep(POLL_S)
    return pid
