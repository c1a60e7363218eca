"""Files of a sandbox: list, read, write, make folders, delete, archive — each done inside the sandbox.

Paths are checked against the roots by sandboxes.workspace, and resolved by the sandbox's own
`realpath` in the scripts below.
"""

import base64
from collections.abc import Iterator

from django.utils.translation import gettext_lazy as _

from cocoon import activity
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import InvalidParams, field_error
from sandboxes.nodes import driver_of
from sandboxes.types import FileContent, FileEntry
from sandboxes.workspace import checked, normalize, record_change, run_script, running_sandbox

MAX_FILE_BYTES = 3 * 1024 * 1024  # a file read or written in one call (fits one exec's output)
KINDS = {"f": "file", "d": "directory", "l": "symlink"}  # find's %y letters

activity.register_messages(
    {
        "files.written": _("%(path)s was written in sandbox %(name)s."),
        "files.created": _("Folder %(path)s was created in sandbox %(name)s."),
        "files.deleted": _("%(path)s was deleted in sandbox %(name)s."),
    },
    visibility=Visibility.AGENT,
)

# Run after sandboxes.workspace.PRELUDE; the exit codes are those of sandboxes.workspace.EXIT_ERRORS.
SCRIPTS = {
    "list": """
p=$(realpath -e -- "$1" 2>/dev/null) || exit 3
inside "$p" || exit 4
[ -d "$p" ] || exit 6
if [ "$2" = 1 ]; then find "$p" -mindepth 1 -printf '%y\\t%s\\t%m\\t%T@\\t%P\\0'
else find "$p" -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%m\\t%T@\\t%P\\0'; fi
""",
    "read": """
p=$(realpath -e -- "$1" 2>/dev/null) || exit 3
inside "$p" || exit 4
[ -f "$p" ] || exit 7
[ "$(find "$p" -maxdepth 0 -printf %s)" -le "$2" ] || exit 5
cat -- "$p"
""",
    "write": """
d=$(realpath -e -- "$(dirname -- "$1")" 2>/dev/null) || exit 3
inside "$d" || exit 4
t="$d/$(basename -- "$1")"
if [ -L "$t" ]; then inside "$(realpath -m -- "$t")" || exit 4; fi
[ -d "$t" ] && exit 8
cat > "$t"
""",
    "mkdir": """
p=$(realpath -m -- "$1")
inside "$p" || exit 4
mkdir -p -- "$p"
""",
    "delete": """
d=$(realpath -e -- "$(dirname -- "$1")" 2>/dev/null) || exit 3
t="$d/$(basename -- "$1")"
inside "$t" || exit 4
for root in $COCOON_ROOTS; do [ "$t" = "$root" ] && exit 4; done
[ -e "$t" ] || [ -L "$t" ] || exit 3
if [ "$2" = 1 ]; then rm -rf -- "$t"
elif [ -d "$t" ] && [ ! -L "$t" ]; then rmdir -- "$t" 2>/dev/null || exit 9
else rm -f -- "$t"; fi
""",
    "resolve": """
p=$(realpath -e -- "$1" 2>/dev/null) || exit 3
inside "$p" || exit 4
printf '%s' "$p"
""",
}


def _run(sandbox_id: str, script: str, path: str, *args: str, stdin: bytes | None = None) -> bytes:
    """The output of one of SCRIPTS for path (checked, then resolved, inside the sandbox)."""
    result = run_script(sandbox_id, script, SCRIPTS[script], normalize(path), *args, stdin=stdin)
    return checked(result, path).stdout


def list_files(sandbox_id: str, path: str, recursive: bool = False) -> list[FileEntry]:
    running_sandbox(sandbox_id)
    output = _run(sandbox_id, "list", path, "1" if recursive else "0")
    entries = []
    for record in filter(None, output.split(b"\0")):
        kind, size, mode, mtime, name = record.decode(errors="replace").split("\t", 4)
        entries.append(FileEntry(name, KINDS.get(kind, "other"), int(size), mode, float(mtime)))
    return sorted(entries, key=lambda entry: entry.name)


def read_file(sandbox_id: str, path: str, encoding: str | None = None) -> FileContent:
    running_sandbox(sandbox_id)
    content = _run(sandbox_id, "read", path, str(MAX_FILE_BYTES))
    if encoding != "base64":
        try:
            return FileContent(content.decode("utf-8"), "utf-8")
        except UnicodeDecodeError:
            pass  # binary: answered as base64 whatever was asked
    return FileContent(base64.b64encode(content).decode(), "base64")


def _content_bytes(content: str, encoding: str) -> bytes:
    try:
        return base64.b64decode(content, validate=True) if encoding == "base64" else content.encode()
    except ValueError:  # not base64 (binascii.Error is one), or text with lone surrogates
        message = _("Is not valid base64.") if encoding == "base64" else _("Is not valid UTF-8 text.")
        raise field_error("content", message) from None


def write_file(sandbox_id: str, path: str, content: str, encoding: str, *, actor: Actor) -> None:
    data = _content_bytes(content, encoding)
    sandbox = running_sandbox(sandbox_id)
    if len(data) > MAX_FILE_BYTES:
        raise InvalidParams(_("%(path)s is larger than the limit."), path=path)
    _run(sandbox_id, "write", path, stdin=data)
    record_change(sandbox, "files.written", actor, path=path)


def make_directory(sandbox_id: str, path: str, *, actor: Actor) -> None:
    sandbox = running_sandbox(sandbox_id)
    _run(sandbox_id, "mkdir", path)
    record_change(sandbox, "files.created", actor, path=path)


def delete_path(sandbox_id: str, path: str, recursive: bool, *, actor: Actor) -> None:
    sandbox = running_sandbox(sandbox_id)
    _run(sandbox_id, "delete", path, "1" if recursive else "0")
    record_change(sandbox, "files.deleted", actor, path=path)


def archive(sandbox_id: str, path: str) -> Iterator[bytes]:
    """A tar stream of path; resolved inside the sandbox, so it holds nothing from outside path."""
    running_sandbox(sandbox_id)
    resolved = _run(sandbox_id, "resolve", path).decode()
    return driver_of(sandbox_id).get_archive(sandbox_id, resolved)
