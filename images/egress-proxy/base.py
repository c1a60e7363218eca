"""What every part of the egress proxy shares: its environment (its folder, where it listens), the size
and patience of a read, and Denied, the refusal every check raises."""

import os

DIR = os.environ.get("COCOON_EGRESS_DIR", "/etc/cocoon-egress")
# In its container the proxy listens on every network it is attached to; as a local process, set it.
BIND = os.environ.get("COCOON_EGRESS_BIND", "0.0.0.0")  # noqa: S104
FORWARD_PORT = int(os.environ.get("COCOON_EGRESS_FORWARD_PORT", "3128"))
CREDENTIAL_PORT = int(os.environ.get("COCOON_EGRESS_CREDENTIAL_PORT", "8080"))
PIECE = 65536  # bodies and responses move in pieces of at most this size
IDLE_TIMEOUT_S = 300


class Denied(Exception):
    def __init__(self, reason: str, status: int = 403) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
