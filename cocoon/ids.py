"""Public ids: a short type prefix and random lowercase base32, e.g. sb_k3v9x2m4q7ta."""

import base64
import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{base64.b32encode(secrets.token_bytes(10)).decode().lower()}"
