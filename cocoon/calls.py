"""Where RPC calls run: one pool of threads, shared by HTTP and WebSocket calls, that outlive the calls.

Django's handler started a thread for each HTTP request and joined it afterwards; WebSocket calls ran in
the event loop's default executor, min(32, CPUs + 4) threads, which six agent.wait calls on this machine
filled, holding up every other call. A call may block its thread for long (agent.wait up to an hour),
so the pool is wide, its threads started only when calls need them; and one caller (a token) has at
most PER_CALLER of them at once, its further calls waiting in the event loop, so that no holder of a
token can hold up everybody else's calls.
"""

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

THREADS = 128
PER_CALLER = 32

T = TypeVar("T")

_executor = ThreadPoolExecutor(THREADS, thread_name_prefix="rpc")
_callers: dict[str, tuple[asyncio.Semaphore, int]] = {}  # caller -> its slots, calls holding or awaiting one


async def in_thread(caller: str, function: Callable[..., T], *args: Any) -> T:
    """function(*args) in a pool thread, once the caller has fewer than PER_CALLER calls there."""
    slots, calls = _callers.get(caller) or (asyncio.Semaphore(PER_CALLER), 0)
    _callers[caller] = (slots, calls + 1)
    try:
        async with slots:
            result: T = await sync_to_async(_call, thread_sensitive=False, executor=_executor)(
                function, *args
            )
            return result
    finally:
        slots, calls = _callers[caller]
        if calls == 1:
            del _callers[caller]
        else:
            _callers[caller] = (slots, calls - 1)


def _call(function: Callable[..., T], *args: Any) -> T:
    try:
        return function(*args)
    finally:
        for connection in connections.all(initialized_only=True):
            if connection.vendor == "sqlite":
                # Kept for the thread's next call: opening it (its PRAGMAs, Django's SQL functions) was
                # half of system.info's time. CONN_MAX_AGE stays 0 for Django's own request threads,
                # which end with their request, and for PostgreSQL, whose connections are few.
                connection.close_at = None
            connection.close_if_unusable_or_obsolete()  # as Django after a request: a broken one goes
