"""Locks held across the processes that share one database (cocoond, workers): an advisory lock on a
connection of its own on PostgreSQL (released when it closes, also on a crash), a file lock next to the
SQLite database, which lives in the data directory."""

import fcntl
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections


def _key(name: str) -> int:
    """A stable signed 64-bit key for an advisory lock."""
    return int.from_bytes(hashlib.sha256(f"cocoon:{name}".encode()).digest()[:8], "big", signed=True)


@contextmanager
def exclusive(name: str, *, wait: bool = True) -> Iterator[bool]:
    """Hold the lock called name while the block runs; yields whether it was got (always True when
    waiting; without waiting, False if another process holds it: the block must then do nothing)."""
    if connections[DEFAULT_DB_ALIAS].vendor == "postgresql":
        lock_connection = connections.create_connection(DEFAULT_DB_ALIAS)
        try:
            with lock_connection.cursor() as cursor:
                if wait:
                    cursor.execute("SELECT pg_advisory_lock(%s)", [_key(name)])
                    got = True
                else:
                    cursor.execute("SELECT pg_try_advisory_lock(%s)", [_key(name)])
                    got = bool(cursor.fetchone()[0])
            yield got
        finally:
            lock_connection.close()
        return
    with (settings.DATA_DIR / f"{name}.lock").open("a") as lock_file:  # released when the file closes
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def busy(name: str) -> bool:
    """Whether another process (or block) holds the lock called name right now."""
    with exclusive(name, wait=False) as got:
        return not got
