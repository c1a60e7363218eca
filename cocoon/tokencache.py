"""Tokens verified against the database, remembered per process so that a request costs no query.

An entry is the actor of a token digest, for at most TTL_S. A token that is deleted (revoked, or by
any other way: the signal sees them all) is forgotten here at once and, with REDIS_URL, in every other
process through a Redis publish that each process's listener hears. Should the listener miss one
(Redis away, a connection that died quietly: it pings), it forgets everything once subscribed again,
and TTL_S bounds the rest. Without REDIS_URL only this process is told: a token deleted by another
process (`manage.py shell`) holds here for up to TTL_S.
"""

import functools
import logging
import threading
import time
from datetime import datetime

import redis
from django.conf import settings
from django.utils import timezone

from cocoon.actors import Actor

logger = logging.getLogger(__name__)

TTL_S = 60.0
MAX_ENTRIES = 10_000  # digests are only stored once verified, but the table stays bounded regardless
RETRY_S = 0.5  # the listener subscribes again after losing Redis, waiting twice as long each time
RETRY_MAX_S = 30.0
PING_S = 15.0  # a quiet listener pings Redis this often; no answer by the next time, and it reconnects

_lock = threading.Lock()
_entries: dict[str, tuple[Actor, float]] = {}  # digest -> (actor, until when it may be used: monotonic)
_generation = 0  # counts forgetting: a lookup that raced one is not remembered
_listening = False


def get(digest: str) -> Actor | None:
    _listen()
    with _lock:
        entry = _entries.get(digest)
    if entry is None or time.monotonic() > entry[1]:
        return None
    return entry[0]


def generation() -> int:
    """Taken before a database lookup and handed to put()."""
    return _generation


def put(digest: str, actor: Actor, looked_up_at: int, *, expires_at: datetime | None = None) -> None:
    """Remember a token the database had (for TTL_S, and never past its expiry), unless a token was
    forgotten since the lookup began (the lookup may have read it just before its deletion was committed)."""
    keep_s = TTL_S if expires_at is None else min(TTL_S, (expires_at - timezone.now()).total_seconds())
    with _lock:
        if looked_up_at != _generation:
            return
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[digest] = (actor, time.monotonic() + keep_s)


def forget(token_id: str) -> None:
    """The token no longer holds: here now, in the other processes as soon as they hear it."""
    _forget_here(token_id)
    if settings.REDIS_URL:
        try:
            _publisher(settings.REDIS_URL).publish(_channel(), token_id)
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


@functools.cache
def _publisher(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2)


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
    client = redis.Redis.from_url(settings.REDIS_URL, socket_keepalive=True)
    failures = 0
    while True:
        pubsub = client.pubsub()  # type: ignore[no-untyped-call]
        try:
            pubsub.subscribe(_channel())
            pinged = False
            while True:
                message = pubsub.get_message(timeout=PING_S)
                if message is None:  # quiet: is the connection still there? (an idle one may be dead)
                    if pinged:
                        raise redis.ConnectionError("Redis did not answer a ping")
                    pubsub.ping()
                    pinged = True
                    continue
                pinged = False
                if message["type"] == "subscribe":  # listening from now: forget what came before
                    clear()
                    failures = 0
                elif message["type"] == "message":
                    _forget_here(message["data"].decode())
        except Exception as error:
            failures += 1
            if failures == 1:
                logger.warning("the token revocation listener lost Redis: %s", error)
            clear()
            time.sleep(min(RETRY_S * 2**failures, RETRY_MAX_S))
        finally:
            pubsub.close()
