"""The data directory (COCOON_DATA): 0700, with secret-bearing files 0600.

Imported by settings.py, so it must not import Django.
"""

import os
import secrets
from collections.abc import Callable
from pathlib import Path


def ensure_private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def write_private_file(path: Path, content: str) -> None:
    """Write content to a file only its owner can read, replacing any previous file atomically."""
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    os.replace(tmp, path)


def read_or_create_private_file(path: Path, create: Callable[[], str]) -> str:
    """Return the file's content, creating it (0600) with create() on first use."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        value = create()
        ensure_private_dir(path.parent)
        # Written in full under another name, then linked into place: processes starting at once on one
        # data directory (deploy/compose.yaml) never read a file that is there but not yet written.
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(value)
        try:
            os.link(tmp, path)
        except FileExistsError:  # another process won the race: use its value
            return path.read_text().strip()
        finally:
            os.unlink(tmp)
        return value
