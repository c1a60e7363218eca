"""Which sandboxes a poll is reading right now, and when each was last polled, for every process that
polls: the worker's poller and agent.wait's own look when it hears nothing.

Without Redis there is one process, and this lives in its memory. With REDIS_URL there are several
(cocoond processes behind one address, workers), and it lives in Redis: kept per process, each cocoond
polled sandboxes the worker had polled a moment ago, and two processes could decide one agent at once.
A claim expires after CLAIM_TTL_S, so a process that dies while polling blocks no one for long.
"""

import secrets
import threading
import time
from functools import cache
from typing import Protocol

import redis
from django.conf import settings

CLAIM_TTL_S = 60  # longer than any tick takes (POLL_TIMEOUT_S per batch of POLL_PARALLEL sandboxes)
WATCH_TTL_S = 30  # a watch lease (agents.watch), renewed every tick by the process that watches
POLLED_TTL_S = 60  # how long "last polled at" is kept; only the last few seconds are ever asked about


class PollClaims(Protocol):
    def claim(self, sandbox_ids: set[str]) -> set[str]:
        """Claim the sandboxes no one is polling; returns those claimed (to release each afterwards)."""
        ...

    def release(self, sandbox_id: str, polled: bool) -> None:
        """Give a claim back; polled: the poll finished, so it counts as the sandbox's last poll."""
        ...

    def polled_within(self, sandbox_id: str, seconds: float) -> bool:
        """Whether any process finished polling the sandbox in the last `seconds`."""
        ...

    def watch(self, sandbox_id: str) -> bool:
        """Take or renew this process's lease on watching the sandbox; False when another holds it."""
        ...

    def unwatch(self, sandbox_id: str) -> None: ...

    def watched_elsewhere(self, sandbox_id: str) -> bool:
        """Whether another process holds the sandbox's watch lease."""
        ...


class MemoryPollClaims:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._polled_at: dict[str, float] = {}

    def claim(self, sandbox_ids: set[str]) -> set[str]:
        with self._lock:
            claimed = sandbox_ids - self._in_flight
            self._in_flight |= claimed
        return claimed

    def release(self, sandbox_id: str, polled: bool) -> None:
        with self._lock:
            self._in_flight.discard(sandbox_id)
            if polled:
                self._polled_at[sandbox_id] = time.monotonic()

    def polled_within(self, sandbox_id: str, seconds: float) -> bool:
        with self._lock:
            return time.monotonic() - self._polled_at.get(sandbox_id, float("-inf")) <= seconds

    # One process: its watcher is the only one.
    def watch(self, sandbox_id: str) -> bool:
        return True

    def unwatch(self, sandbox_id: str) -> None:
        pass

    def watched_elsewhere(self, sandbox_id: str) -> bool:
        return False


# Deletes a claim only if it is still ours (it may have expired and been taken by another process).
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
# Takes a lease that is free or renews our own; 0 when another process holds it.
_LEASE = (
    "local held = redis.call('get', KEYS[1]) "
    "if held and held ~= ARGV[1] then return 0 end "
    "redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 1"
)


class RedisPollClaims:
    def __init__(self, url: str, prefix: str) -> None:
        self._redis = redis.Redis.from_url(url)
        self._prefix = prefix
        self._token = secrets.token_hex(8)  # this process's claims
        self._release = self._redis.register_script(_RELEASE)
        self._lease = self._redis.register_script(_LEASE)

    def _key(self, kind: str, sandbox_id: str) -> str:
        return f"{self._prefix}:{kind}:{sandbox_id}"

    def claim(self, sandbox_ids: set[str]) -> set[str]:
        ordered = sorted(sandbox_ids)
        pipeline = self._redis.pipeline(transaction=False)
        for sandbox_id in ordered:
            pipeline.set(self._key("claim", sandbox_id), self._token, nx=True, ex=CLAIM_TTL_S)
        return {sandbox_id for sandbox_id, won in zip(ordered, pipeline.execute(), strict=True) if won}

    def release(self, sandbox_id: str, polled: bool) -> None:
        if polled:
            self._redis.set(self._key("polled", sandbox_id), repr(time.time()), ex=POLLED_TTL_S)
        self._release(keys=[self._key("claim", sandbox_id)], args=[self._token])

    def polled_within(self, sandbox_id: str, seconds: float) -> bool:
        polled_at = self._redis.get(self._key("polled", sandbox_id))
        return polled_at is not None and time.time() - float(polled_at) <= seconds

    def watch(self, sandbox_id: str) -> bool:
        return bool(self._lease(keys=[self._key("watch", sandbox_id)], args=[self._token, WATCH_TTL_S]))

    def unwatch(self, sandbox_id: str) -> None:
        self._release(keys=[self._key("watch", sandbox_id)], args=[self._token])

    def watched_elsewhere(self, sandbox_id: str) -> bool:
        held = self._redis.get(self._key("watch", sandbox_id))
        return held is not None and held != self._token.encode()


@cache
def _claims(redis_url: str, instance: str) -> PollClaims:
    if redis_url:
        return RedisPollClaims(redis_url, f"cocoon:{instance}:poll")
    return MemoryPollClaims()


def get_claims() -> PollClaims:
    return _claims(settings.REDIS_URL, settings.COCOON_INSTANCE)
