"""Stable error codes and the errors every layer raises: one base, typed by code (SPEC §2.1)."""

import errno
from enum import StrEnum
from typing import Any

from django.utils.functional import Promise, lazy
from django.utils.translation import gettext_lazy as _


class ErrorCode(StrEnum):
    INVALID_JSON = "invalid_json"
    INVALID_REQUEST = "invalid_request"
    INVALID_PARAMS = "invalid_params"
    UNAUTHORIZED = "unauthorized"
    TOKEN_REVOKED = "token_revoked"
    TOKEN_EXPIRED = "token_expired"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    RATE_LIMITED = "rate_limited"
    QUOTA_EXCEEDED = "quota_exceeded"
    CEILING_EXCEEDED = "ceiling_exceeded"
    TIMEOUT = "timeout"
    DRIVER_ERROR = "driver_error"
    UNAVAILABLE = "unavailable"
    INTERNAL_ERROR = "internal_error"


HTTP_STATUS = {
    ErrorCode.INVALID_JSON: 400,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.INVALID_PARAMS: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.TOKEN_REVOKED: 401,
    ErrorCode.TOKEN_EXPIRED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.CONFLICT: 409,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.QUOTA_EXCEEDED: 403,
    ErrorCode.CEILING_EXCEEDED: 403,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.DRIVER_ERROR: 502,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.INTERNAL_ERROR: 500,
}

DEFAULT_MESSAGES = {
    ErrorCode.INVALID_JSON: _("The request body is not valid JSON."),
    ErrorCode.INVALID_REQUEST: _("The request is malformed."),
    ErrorCode.INVALID_PARAMS: _("The parameters are invalid."),
    ErrorCode.UNAUTHORIZED: _("A valid token is required."),
    ErrorCode.TOKEN_REVOKED: _("This token was revoked: whatever still uses it needs a new one."),
    ErrorCode.TOKEN_EXPIRED: _("This token has expired: whatever still uses it needs a new one."),
    ErrorCode.FORBIDDEN: _("This token may not do that."),
    ErrorCode.NOT_FOUND: _("Not found."),
    ErrorCode.METHOD_NOT_ALLOWED: _("This HTTP method is not allowed here."),
    ErrorCode.CONFLICT: _("The request conflicts with the current state."),
    ErrorCode.RATE_LIMITED: _("Too many failed attempts from your address; try again later."),
    ErrorCode.QUOTA_EXCEEDED: _("A quota of the project would be exceeded."),
    ErrorCode.CEILING_EXCEEDED: _("A ceiling of the token would be exceeded."),
    ErrorCode.TIMEOUT: _("The operation timed out."),
    ErrorCode.DRIVER_ERROR: _("The sandbox driver reported an error."),
    ErrorCode.UNAVAILABLE: _("The service is not available right now."),
    ErrorCode.INTERNAL_ERROR: _("An internal error occurred."),
}


def _interpolate(message: Any, params: dict[str, Any]) -> str:
    return str(message) % params if params else str(message)


# A translated message with its %-params, rendered only when it is turned into a string: errors are
# raised before anyone knows (or has paid to look up) the language they will be answered in.
interpolate_lazy = lazy(_interpolate, str)


def force_text(value: Any) -> Any:
    """value with every lazy translation inside it rendered in the active language."""
    if isinstance(value, Promise):
        return str(value)
    if isinstance(value, dict):
        return {key: force_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [force_text(item) for item in value]
    return value


class CocoonError(Exception):
    """The one base of every error a client is answered with: {"error": {"code", "message", "details"}}.

    Services raise its typed subclasses (NotFound, Conflict, ...; an app adds its own, such as
    NothingToCommit); only the wire layer (registry, views, consumers, MCP) renders them. message is a
    lazy translation (with %-style params filled in when rendered), so the text is produced in the
    language of whoever receives it.
    """

    code: ErrorCode = ErrorCode.INTERNAL_ERROR

    def __init__(self, message: Any = None, details: dict[str, Any] | None = None, **params: Any) -> None:
        self.message = message if message is not None else DEFAULT_MESSAGES[self.code]
        self.params = params
        self.details = details or {}
        super().__init__(f"{self.code}: {self.message}")

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    @property
    def http_headers(self) -> dict[str, str]:
        """What an HTTP answer carries besides the body: the auth scheme of a 401, when to retry a 429."""
        if self.http_status == 401:
            return {"WWW-Authenticate": 'Bearer realm="cocoon"'}
        if self.code == ErrorCode.RATE_LIMITED:
            return {"Retry-After": str(self.details["retryAfterS"])}
        return {}

    def render(self) -> dict[str, Any]:
        """The wire shape, in the active language."""
        message = _interpolate(self.message, self.params)
        return {"code": str(self.code), "message": message, "details": force_text(self.details)}


class InvalidParams(CocoonError):
    code = ErrorCode.INVALID_PARAMS


class Unauthorized(CocoonError):
    code = ErrorCode.UNAUTHORIZED


class TokenRevoked(Unauthorized):
    """A token that was once valid and has been revoked: its owner can tell a stale script by it."""

    code = ErrorCode.TOKEN_REVOKED


class TokenExpired(Unauthorized):
    code = ErrorCode.TOKEN_EXPIRED


class Forbidden(CocoonError):
    code = ErrorCode.FORBIDDEN


class NotFound(CocoonError):
    code = ErrorCode.NOT_FOUND


class Conflict(CocoonError):
    code = ErrorCode.CONFLICT


class QuotaExceeded(CocoonError):
    code = ErrorCode.QUOTA_EXCEEDED


class CeilingExceeded(CocoonError):
    code = ErrorCode.CEILING_EXCEEDED


class RateLimited(CocoonError):
    code = ErrorCode.RATE_LIMITED


class Timeout(CocoonError):
    code = ErrorCode.TIMEOUT


class Unavailable(CocoonError):
    code = ErrorCode.UNAVAILABLE


class InternalError(CocoonError):
    code = ErrorCode.INTERNAL_ERROR


class RpcError(CocoonError):
    """An error of the wire itself (a malformed frame, a bad token, an unknown method), raised by the
    wire layer alone, which knows its code only at the call site."""

    def __init__(
        self,
        code: ErrorCode,
        message: Any = None,
        details: dict[str, Any] | None = None,
        **params: Any,
    ) -> None:
        self.code = code
        super().__init__(message, details, **params)


def field(path: str, message: Any, code: str = "invalid") -> dict[str, Any]:
    """One entry of details.fields[]: the shape schema validation answers in."""
    return {"path": path, "code": code, "message": message}


def fields_error(fields: list[dict[str, Any]], **details: Any) -> InvalidParams:
    """invalid_params naming fields (built with field()), with any further details."""
    return InvalidParams(details={"fields": fields, **details})


def field_error(path: str, message: Any, code: str = "invalid") -> InvalidParams:
    """invalid_params naming one field."""
    return fields_error([field(path, message, code)])


def _redis_errors() -> tuple[type[BaseException], ...]:
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # pragma: no cover - redis is a dependency
        return ()
    return (RedisConnectionError, RedisTimeoutError)


# What Redis clients raise while Redis (REDIS_URL) is unreachable: restarting, crashed, cut off.
REDIS_ERRORS = _redis_errors()


def unexpected_error(error: BaseException) -> CocoonError:
    """The answer for an exception no layer turned into an RpcError: a full data directory (SQLite's
    "database or disk is full", ENOSPC from a file write) is the operator's to fix and says so, as does
    an unreachable Redis (it comes back by itself: retry); anything else is an internal error."""
    full = isinstance(error, OSError) and error.errno == errno.ENOSPC
    if full or "database or disk is full" in str(error):
        return Unavailable(_("The server's data directory is full; free some space and retry."))
    if isinstance(error, REDIS_ERRORS):
        return Unavailable(_("The server cannot reach Redis right now; retry shortly."))
    return InternalError()
