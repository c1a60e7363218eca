"""Lock-out of client addresses that keep presenting wrong tokens or passwords.

Every credential check (HTTP RPC, WebSocket connect, /mcp, the login form, Django's password backend)
runs through guarded(): while an address has COCOON_AUTH_FAILURE_LIMIT failures inside the window it
gets rate_limited (429 with Retry-After), right credentials included, or guessing would go on. A thin
adapter over the `limits` library's moving window: in Redis when REDIS_URL is set (shared by every
cocoond process), else in this process's memory (without Redis there is only one process).
"""

import math
import time
from collections.abc import Callable
from functools import cache
from ipaddress import ip_address, ip_network
from typing import Any, TypeVar

import limits
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from cocoon.errors import RateLimited

T = TypeVar("T")
NAMESPACE = "cocoon-auth-failures"


@cache
def _limiter() -> tuple[MovingWindowRateLimiter, limits.RateLimitItem]:
    storage = storage_from_string(settings.REDIS_URL or "memory://")
    return MovingWindowRateLimiter(storage), limits.parse(settings.COCOON_AUTH_FAILURE_LIMIT)


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


def retry_after(address: str) -> int:
    """Seconds until address may present credentials again; 0 if it may now."""
    limiter, limit = _limiter()
    key = bucket(address)
    if limiter.test(limit, NAMESPACE, key):
        return 0
    reset_at = limiter.get_window_stats(limit, NAMESPACE, key).reset_time
    return max(1, math.ceil(reset_at - time.time()))


def record_failure(address: str) -> None:
    limiter, limit = _limiter()
    limiter.hit(limit, NAMESPACE, bucket(address))


def refuse_if_locked_out(address: str) -> None:
    if seconds := retry_after(address):
        raise RateLimited(details={"retryAfterS": seconds})


def guarded(address: str, check: Callable[[], T | None]) -> T | None:
    """check()'s result for a client at address; None (a failure) is counted.

    Raises rate_limited while the address is locked out, without running check at all.
    """
    refuse_if_locked_out(address)
    result = check()
    if result is None:
        record_failure(address)
    return result


class ThrottledModelBackend(ModelBackend):
    """Django's user/password backend under the same lock-out (the UI login form and /admin/login).

    A locked-out address is refused with PermissionDenied, which makes django.contrib.auth.authenticate
    stop and report a failed login; the UI's login view checks first and answers 429 itself.
    """

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        if request is None:  # not a client's request (management commands): nothing to count against
            return super().authenticate(request, username, password, **kwargs)
        address = request.META.get("REMOTE_ADDR", "")
        if retry_after(address):
            raise PermissionDenied
        user = super().authenticate(request, username, password, **kwargs)
        if user is None:
            record_failure(address)
        return user
