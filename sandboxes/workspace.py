"""The workspace inside a sandbox, as files.py and git.py reach it: paths, scripts, changes announced.

Every path is resolved by the sandbox's own `realpath` and checked against settings.sandbox.fileRoots
there, so a symlink in a workspace can only ever lead somewhere inside that sandbox; nothing from a
sandbox runs, and no sandbox path is followed, on the host.
"""

import posixpath
from typing import Any

from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import activity, config, events
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import CocoonError, Conflict, Forbidden, InvalidParams, NotFound
from sandboxes.drivers.base import WORKSPACE, ExecResult
from sandboxes.models import Sandbox
from sandboxes.nodes import driver_of
from sandboxes.services import get_sandbox

events.register_types("workspace.updated", visibility=Visibility.AGENT)

# No coreutils stat/ls -l in these scripts: gVisor (Debian's runsc) refuses their statx flag
# AT_NO_AUTOMOUNT with EINVAL; find's fstatat works everywhere.
# Shared by every script: is $1 inside one of the roots in $COCOON_ROOTS?
PRELUDE = """
inside() { for root in $COCOON_ROOTS; do case "$1/" in "$root"/*) return 0;; esac; done; return 1; }
"""
# How a script says why it refused a path.
EXIT_ERRORS: dict[int, tuple[type[CocoonError], Any]] = {
    3: (NotFound, _("%(path)s does not exist.")),
    4: (Forbidden, _("%(path)s is outside the allowed folders.")),
    5: (InvalidParams, _("%(path)s is larger than the limit.")),
    6: (InvalidParams, _("%(path)s is not a folder.")),
    7: (InvalidParams, _("%(path)s is not a file.")),
    8: (Conflict, _("%(path)s is a folder.")),
    9: (Conflict, _("%(path)s is not empty.")),
}


def _roots() -> list[str]:
    return config.get_settings()["sandbox"]["fileRoots"]


def normalize(path: str) -> str:
    """An absolute, lexically clean path (relative ones are taken from /workspace) inside the roots."""
    if "\0" in path:
        raise InvalidParams(_("%(path)s is not a valid path."), path=repr(path))
    clean = posixpath.normpath(posixpath.join(WORKSPACE, path))
    if not any(clean == root or clean.startswith(root.rstrip("/") + "/") for root in _roots()):
        raise Forbidden(_("%(path)s is outside the allowed folders."), path=path)
    return clean


def relative(paths: list[str] | None) -> list[str]:
    """paths, each checked against the roots, relative to /workspace (as git takes them there)."""
    return [posixpath.relpath(normalize(path), WORKSPACE) for path in paths or []]


def running_sandbox(sandbox_id: str) -> Sandbox:
    """The sandbox, which must be running: every workspace operation happens inside it."""
    return get_sandbox(sandbox_id).ensure_running()


def run_script(sandbox_id: str, name: str, script: str, *args: str, stdin: bytes | None = None) -> ExecResult:
    """script (sh, after PRELUDE) in the sandbox, with the roots in $COCOON_ROOTS."""
    command = ["sh", "-c", PRELUDE + script, name, *args]
    environment = {"COCOON_ROOTS": " ".join(root.rstrip("/") for root in _roots())}
    return driver_of(sandbox_id).exec(sandbox_id, command, stdin=stdin, env=environment, timeout=300)


def checked(result: ExecResult, path: str) -> ExecResult:
    """result, or the error its script's exit code names for path (a driver error for any other)."""
    if result.exit_code in EXIT_ERRORS:
        error, message = EXIT_ERRORS[result.exit_code]
        raise error(message, path=path)
    return result.checked()


def record_change(sandbox: Sandbox, key: str, actor: Actor, **params: Any) -> None:
    """The activity entry and the workspace.updated event of one change, together."""
    with transaction.atomic():
        activity.record(key, {"name": sandbox.name, **params}, actor=actor, sandbox_id=sandbox.id)
        events.publish("workspace.updated", {"action": key, **params}, sandbox_id=sandbox.id)
