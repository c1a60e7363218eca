"""Access logging for Daphne that never writes a token from a ?token= query."""

import re
from typing import Any

from daphne.access import AccessLogGenerator

TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&#\s]*", re.IGNORECASE)


def redact(path: str) -> str:
    return TOKEN_IN_QUERY.sub(r"\1[redacted]", path)


class RedactingAccessLog(AccessLogGenerator):
    def __call__(self, protocol: str, action: str, details: dict[str, Any]) -> None:
        if "path" in details:
            details = dict(details, path=redact(str(details["path"])))
        super().__call__(protocol, action, details)
