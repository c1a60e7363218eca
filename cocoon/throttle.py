"""Lock-out of failing credential attempts, never of valid ones.

Tokens (HTTP RPC, WebSocket connect, /mcp, the terminal URL, the login form) run through guarded(): a
valid token is accepted from any address, always; a wrong one counts against its client's address, and
past COCOON_AUTH_FAILURE_LIMIT that address's wrong tokens get rate_limited (429 with Retry-After).
cocoon's tokens are random and long, so no lock is needed against guessing them: the limit only slows
a client down that keeps sending wrong ones, and one stray script cannot lock out the people sharing
its address (an office NAT, a reverse proxy without COCOON_TRUSTED_PROXIES).

Passwords are guessable, so a locked password is refused even when right: failures count per user name
and address (COCOON_AUTH_FAILURE_LIMIT), and per user name across addresses (COCOON_AUTH_USER_FAILURE_LIMIT,
slower), the way django-axes locks; another user's right password from the same address still works.

A thin adapter over the `limits` library's moving window: in Redis when REDIS_URL is set (shared by every
cocoond process), else in this process's memory (without Redis there is only one process).
"""

import logging
import math
import time
from collections.abc import Callable
from functools import cache
from ipaddress import ip_address, ip_network
from typing import Any, NamedTuple, TypeVar

import limits
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from cocoon.errors import RateLimited

logger = logging.getLogger(__name__)

T = TypeVar("T")
NAMESPACE = "cocoon-auth-failures"
USERNAME_MAX = 150  # Django's own bound: a longer name is no user, and must not grow the store


class Limits(NamedTuple):
    limiter: MovingWindowRateLimiter
    per_address: limits.RateLimitItem  # COCOON_AUTH_FAILURE_LIMIT
    per_user: limits.RateLimitItem  # COCOON_AUTH_USER_FAILURE_LIMIT


@cache
def _limiter() -> Limits:
    """The moving-window limiter on its storage and the two limits, parsed once."""
    return Limits(
        MovingWindowRateLimiter(storage_from_string(settings.REDIS_URL or "memory://")),
        limits.parse(settings.COCOON_AUTH_FAILURE_LIMIT),
        limits.parse(settings.COCOON_AUTH_USER_FAILURE_LIMIT),
    )


def bucket(address: str) -> str:
    """Whom failures are counted against: the address, or its /64 for IPv6 (one host's usual share)."""
    try:
        parsed = ip_address(address)
    except ValueError:
        return address or "unknown"
    if parsed.version == 4:
        return str(parsed)
    if parsed.ipv4_mapped:
        return str(parsed.ipv4_mapped)
    return str(ip_network(f"{parsed}/64", strict=False))


def _retry_after(limit: limits.RateLimitItem, *key: str) -> int:
    """Seconds until the key may fail again; 0 if it may now."""
    limiter = _limiter().limiter
    if limiter.test(limit, NAMESPACE, *key):
        return 0
    return _seconds_left(limit, *key)


def _seconds_left(limit: limits.RateLimitItem, *key: str) -> int:
    reset_at = _limiter().limiter.get_window_stats(limit, NAMESPACE, *key).reset_time
    return max(1, math.ceil(reset_at - time.time()))


def _hit(limit: limits.RateLimitItem, *key: str) -> bool:
    """Count one failure; False (and not counted) once the key is at its limit."""
    return _limiter().limiter.hit(limit, NAMESPACE, *key)


# -- tokens ----------------------------------------------------------------------------------------


def guarded(address: str, check: Callable[[], T | None]) -> T | None:
    """check()'s result for a client at address: a valid credential (not None) always passes; a failure
    is counted against the address and raises rate_limited once the address is over its limit."""
    result = check()
    if result is not None:
        return result
    per_address, key = _limiter().per_address, ("token", bucket(address))
    if _hit(per_address, *key):  # one round trip for a failure under the limit
        return None
    seconds = _seconds_left(per_address, *key)
    logger.warning("wrong tokens from %s past COCOON_AUTH_FAILURE_LIMIT: refused for %s s", address, seconds)
    raise RateLimited(details={"retryAfterS": seconds})


# -- passwords -------------------------------------------------------------------------------------


def _password_keys(username: str, address: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The keys of a user name's failures: from this address, and from anywhere."""
    name = username[:USERNAME_MAX]
    return ("password", name, bucket(address)), ("password-user", name)


def password_retry_after(username: str, address: str) -> int:
    """Seconds until this user name may try a password again from address (either lock); 0 if now."""
    here, anywhere = _password_keys(username, address)
    return max(_retry_after(_limiter().per_address, *here), _retry_after(_limiter().per_user, *anywhere))


def refuse_password_if_locked(username: str, address: str) -> None:
    if seconds := password_retry_after(username, address):
        raise RateLimited(details={"retryAfterS": seconds})


def record_password_failure(username: str, address: str) -> None:
    here, anywhere = _password_keys(username, address)
    _hit(_limiter().per_address, *here)
    _hit(_limiter().per_user, *anywhere)
    if password_retry_after(username, address):
        logger.warning("wrong passwords for user %r from %s: locked", username[:USERNAME_MAX], address)


class ThrottledModelBackend(ModelBackend):
    """Django's user/password backend under the password lock (the UI login form and /admin/login).

    A locked user name is refused with PermissionDenied, which makes django.contrib.auth.authenticate
    stop and report a failed login; the UI's login view checks first and answers 429 itself.
    """

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        if request is None:  # not a client's request (management commands): nothing to count against
            return super().authenticate(request, username, password, **kwargs)
        if not settings.COCOON_PASSWORD_LOGIN:
            return None  # COCOON_PASSWORD_LOGIN=0: no password logs in, /admin/login's neither
        address, name = request.META.get("REMOTE_ADDR", ""), username or ""
        if password_retry_after(name, address):
            raise PermissionDenied
        user = super().authenticate(request, username, password, **kwargs)
        if user is None:
            record_password_failure(name, address)
        return user
