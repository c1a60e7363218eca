"""Tokens verified against the database, remembered per process so that a request costs no query.

An entry is the actor of a token digest, for at most TTL_S. A token that is deleted (revoked, or by
any other way: the signal sees them all) is forgotten here at once and, with REDIS_URL, in every other
process through a Redis publish that each process's listener hears. Should the listener miss one
(Redis away), it forgets everything when it subscribes again, and TTL_S bounds the rest.
"""

import logging
import threading
import time

import redis
from django.conf import settings

from cocoon.actors import Actor

logger = logging.getLogger(__name__)

TTL_S = 60.0
MAX_ENTRIES = 10_000  # digests are only stored once verified, but the table stays bounded regardless
RETRY_S = 1.0  # the listener subscribes again this long after losing Redis

_lock = threading.Lock()
_entries: dict[str, tuple[Actor, float]] = {}  # digest -> (actor, when verified)
_generation = 0  # counts forgetting: a lookup that raced one is not remembered
_listening = False


def get(digest: str) -> Actor | None:
    _listen()
    with _lock:
        entry = _entries.get(digest)
    if entry is None or time.monotonic() - entry[1] > TTL_S:
        return None
    return entry[0]


def generation() -> int:
    """Taken before a database lookup and handed to put()."""
    return _generation


def put(digest: str, actor: Actor, looked_up_at: int) -> None:
    """Remember a token the database had, unless a token was forgotten since the lookup began (the
    lookup may have read it just before its deletion was committed)."""
    with _lock:
        if looked_up_at != _generation:
            return
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[digest] = (actor, time.monotonic())


def forget(token_id: str) -> None:
    """The token no longer holds: here now, in the other processes as soon as they hear it."""
    _forget_here(token_id)
    if settings.REDIS_URL:
        try:
            _redis().publish(_channel(), token_id)
        except redis.RedisError:  # the others' entries expire within TTL_S
            logger.warning("could not publish the revocation of token %s", token_id, exc_info=True)


def clear() -> None:
    global _generation
    with _lock:
        _generation += 1
        _entries.clear()


def _forget_here(token_id: str) -> None:
    global _generation
    with _lock:
        _generation += 1
        for digest in [digest for digest, (actor, _at) in _entries.items() if actor.token_id == token_id]:
            del _entries[digest]


def _channel() -> str:
    return f"cocoon:{settings.COCOON_INSTANCE}:tokens:forget"


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)


def _listen() -> None:
    """Start this process's listener for the other processes' revocations (once, and only with Redis)."""
    global _listening
    if _listening or not settings.REDIS_URL:
        return
    with _lock:
        if _listening:
            return
        _listening = True
    threading.Thread(target=_listener, name="token-revocations", daemon=True).start()


def _listener() -> None:
    while True:
        try:
            # Pinged every 30 s: a connection that died silently is noticed and opened again.
            client = redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)
            pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            pubsub.subscribe(_channel())
            clear()  # whatever was revoked while nobody listened
            for message in pubsub.listen():
                if message["type"] == "message":
                    _forget_here(message["data"].decode())
        except Exception:
            logger.warning("the token revocation listener lost Redis", exc_info=True)
            clear()
            time.sleep(RETRY_S)
