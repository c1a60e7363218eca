"""The workspace: files, the patch against cocoon-baseline, archives, git — all done inside the sandbox.

Every path is resolved by the sandbox's own `realpath` and checked against settings.sandbox.fileRoots
there, so a symlink in a workspace can only ever lead somewhere inside that sandbox; nothing from a
sandbox runs, and no sandbox path is followed, on the host.
"""

import base64
import posixpath
import re
from collections.abc import Iterator
from typing import Any

import httpx
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import activity, config, events, vault
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import ErrorCode, RpcError, field_error
from sandboxes import gitpush
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import WORKSPACE, DriverError, ExecResult
from sandboxes.services import GIT_ENV, get_sandbox, require_running

MAX_FILE_BYTES = 3 * 1024 * 1024  # a file read or written in one call (fits one exec's output)
BRANCH = re.compile(r"^(?!-)(?!.*\.\.)[\w./-]{1,255}$")
REMOTE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
SPLIT = b"\0\0cocoon-split\0\0"

activity.register_messages(
    {
        "files.written": _("%(path)s was written in sandbox %(name)s."),
        "files.created": _("Folder %(path)s was created in sandbox %(name)s."),
        "files.deleted": _("%(path)s was deleted in sandbox %(name)s."),
        "patch.applied": _("A patch was applied in sandbox %(name)s."),
        "git.committed": _("Commit %(commit)s in sandbox %(name)s."),
        "git.pushed": _("Branch %(branch)s was pushed from sandbox %(name)s."),
        "git.pr_created": _("Pull request #%(number)s was opened from sandbox %(name)s."),
    },
    visibility=Visibility.AGENT,
)
events.register_types("workspace.updated", visibility=Visibility.AGENT)

# No coreutils stat/ls -l in these scripts: gVisor (Debian's runsc) refuses their statx flag
# AT_NO_AUTOMOUNT with EINVAL; find's fstatat works everywhere.
# Shared by every script: is $1 inside one of the roots in $COCOON_ROOTS?
PRELUDE = """
inside() { for root in $COCOON_ROOTS; do case "$1/" in "$root"/*) return 0;; esac; done; return 1; }
"""
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
    # The patch is taken with a throw-away index, so the user's own index is left as it was.
    "diff": """
set -e
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
export GIT_INDEX_FILE="$scratch/index"
git add -A -- "$@"
git diff --cached -M --numstat -z cocoon-baseline -- "$@"
printf '\\0\\0cocoon-split\\0\\0'
git diff --cached -M --name-status -z cocoon-baseline -- "$@"
printf '\\0\\0cocoon-split\\0\\0'
git diff --cached -M --binary --full-index cocoon-baseline -- "$@"
""",
    "apply": """
patch=$(mktemp); trap 'rm -f "$patch"' EXIT
cat > "$patch"
git apply "$@" "$patch"
""",
}
EXIT_ERRORS = {
    3: (ErrorCode.NOT_FOUND, _("%(path)s does not exist.")),
    4: (ErrorCode.FORBIDDEN, _("%(path)s is outside the allowed folders.")),
    5: (ErrorCode.INVALID_PARAMS, _("%(path)s is larger than the limit.")),
    6: (ErrorCode.INVALID_PARAMS, _("%(path)s is not a folder.")),
    7: (ErrorCode.INVALID_PARAMS, _("%(path)s is not a file.")),
    8: (ErrorCode.CONFLICT, _("%(path)s is a folder.")),
    9: (ErrorCode.CONFLICT, _("%(path)s is not empty.")),
}


def _roots() -> list[str]:
    return config.get_settings()["sandbox"]["fileRoots"]


def normalize(path: str) -> str:
    """An absolute, lexically clean path (relative ones are taken from /workspace) inside the roots."""
    if "\0" in path:
        raise RpcError(ErrorCode.INVALID_PARAMS, _("%(path)s is not a valid path."), path=repr(path))
    clean = posixpath.normpath(posixpath.join(WORKSPACE, path))
    if not any(clean == root or clean.startswith(root.rstrip("/") + "/") for root in _roots()):
        raise RpcError(ErrorCode.FORBIDDEN, _("%(path)s is outside the allowed folders."), path=path)
    return clean


def _running_sandbox(sandbox_id: str) -> Any:
    return require_running(get_sandbox(sandbox_id))


def _run(
    sandbox_id: str, script: str, *args: str, stdin: bytes | None = None, env: dict | None = None
) -> ExecResult:
    command = ["sh", "-c", PRELUDE + SCRIPTS[script], script, *args]
    environment = {"COCOON_ROOTS": " ".join(root.rstrip("/") for root in _roots())} | (env or {})
    return get_driver().exec(sandbox_id, command, stdin=stdin, env=environment, timeout=300)


def _checked(result: ExecResult, path: str) -> ExecResult:
    if result.exit_code in EXIT_ERRORS:
        code, message = EXIT_ERRORS[result.exit_code]
        raise RpcError(code, message, path=path)
    return result.checked()


def _changed(sandbox: Any, key: str, actor: Actor, **params: Any) -> None:
    with transaction.atomic():
        activity.record(key, {"name": sandbox.name, **params}, actor=actor, sandbox_id=sandbox.id)
        events.publish("workspace.updated", {"action": key, **params}, sandbox_id=sandbox.id)


# -- files ---------------------------------------------------------------------------------------------


def list_files(sandbox_id: str, path: str, recursive: bool = False) -> list[dict[str, Any]]:
    _running_sandbox(sandbox_id)
    clean = normalize(path)
    output = _checked(_run(sandbox_id, "list", clean, "1" if recursive else "0"), path).stdout
    kinds = {"f": "file", "d": "directory", "l": "symlink"}
    entries = []
    for record in filter(None, output.split(b"\0")):
        kind, size, mode, mtime, name = record.decode(errors="replace").split("\t", 4)
        entries.append(
            {
                "name": name,
                "type": kinds.get(kind, "other"),
                "size": int(size),
                "mode": mode,
                "mtime": float(mtime),
            }
        )
    return sorted(entries, key=lambda entry: entry["name"])


def read_file(sandbox_id: str, path: str, encoding: str | None = None) -> dict[str, Any]:
    _running_sandbox(sandbox_id)
    content = _checked(_run(sandbox_id, "read", normalize(path), str(MAX_FILE_BYTES)), path).stdout
    if encoding != "base64":
        try:
            return {"content": content.decode("utf-8"), "encoding": "utf-8"}
        except UnicodeDecodeError:
            pass  # binary: answered as base64 whatever was asked
    return {"content": base64.b64encode(content).decode(), "encoding": "base64"}


def _content_bytes(content: str, encoding: str) -> bytes:
    try:
        return base64.b64decode(content, validate=True) if encoding == "base64" else content.encode()
    except ValueError:  # not base64 (binascii.Error is one), or text with lone surrogates
        message = _("Is not valid base64.") if encoding == "base64" else _("Is not valid UTF-8 text.")
        raise field_error("content", message) from None


def write_file(sandbox_id: str, path: str, content: str, encoding: str, *, actor: Actor) -> None:
    data = _content_bytes(content, encoding)
    sandbox = _running_sandbox(sandbox_id)
    if len(data) > MAX_FILE_BYTES:
        raise RpcError(ErrorCode.INVALID_PARAMS, _("%(path)s is larger than the limit."), path=path)
    _checked(_run(sandbox_id, "write", normalize(path), stdin=data), path)
    _changed(sandbox, "files.written", actor, path=path)


def make_directory(sandbox_id: str, path: str, *, actor: Actor) -> None:
    sandbox = _running_sandbox(sandbox_id)
    _checked(_run(sandbox_id, "mkdir", normalize(path)), path)
    _changed(sandbox, "files.created", actor, path=path)


def delete_path(sandbox_id: str, path: str, recursive: bool, *, actor: Actor) -> None:
    sandbox = _running_sandbox(sandbox_id)
    _checked(_run(sandbox_id, "delete", normalize(path), "1" if recursive else "0"), path)
    _changed(sandbox, "files.deleted", actor, path=path)


def archive(sandbox_id: str, path: str) -> Iterator[bytes]:
    """A tar stream of path; resolved inside the sandbox, so it holds nothing from outside path."""
    _running_sandbox(sandbox_id)
    resolved = _checked(_run(sandbox_id, "resolve", normalize(path)), path).stdout.decode()
    return get_driver().get_archive(sandbox_id, resolved)


# -- patches -------------------------------------------------------------------------------------------


def _status_name(code: str) -> str:
    return {
        "A": "added",
        "M": "modified",
        "D": "deleted",
        "R": "renamed",
        "C": "copied",
        "T": "typechange",
    }.get(code[:1], "modified")


def diff(sandbox_id: str, paths: list[str] | None = None) -> dict[str, Any]:
    """The workspace against cocoon-baseline as one git patch (untracked, binary, renames, modes)."""
    _running_sandbox(sandbox_id)
    relative = [posixpath.relpath(normalize(path), WORKSPACE) for path in paths or []]
    result = _run(sandbox_id, "diff", *relative).checked()
    if result.truncated:
        raise RpcError(ErrorCode.CONFLICT, _("The patch is too large; download the archive instead."))
    numstat, name_status, patch = result.stdout.split(SPLIT, 2)
    counts: dict[str, tuple[int | None, int | None]] = {}
    fields = numstat.split(b"\0")
    index = 0
    while index < len(fields) and fields[index]:
        added, deleted, path = fields[index].decode().split("\t", 2)
        if not path:  # a rename: the two paths follow
            path = fields[index + 2].decode()
            index += 2
        counts[path] = (None if added == "-" else int(added), None if deleted == "-" else int(deleted))
        index += 1
    files = []
    fields = name_status.split(b"\0")
    index = 0
    while index < len(fields) and fields[index]:
        status = fields[index].decode()
        if status[:1] in {"R", "C"}:
            old, path = fields[index + 1].decode(), fields[index + 2].decode()
            index += 3
        else:
            old, path = None, fields[index + 1].decode()
            index += 2
        added, deleted = counts.get(path, (None, None))
        entry = {"path": path, "status": _status_name(status), "added": added, "deleted": deleted}
        if old:
            entry["oldPath"] = old
        files.append(entry)
    return {"patch": patch.decode("utf-8", errors="surrogateescape"), "files": files}


CONFLICT_LINES = (
    re.compile(r"^error: patch failed: (?P<path>.+):(?P<line>\d+)$"),
    re.compile(r"^error: (?P<path>.+?): (?P<message>.+)$"),
    re.compile(r"^U (?P<path>.+)$"),  # --3way left conflict markers
)


def _conflicts(errors: str) -> list[dict[str, str]]:
    """git apply's complaints, one entry per file."""
    found: dict[str, list[str]] = {}
    for line in errors.splitlines():
        for pattern in CONFLICT_LINES:
            if match := pattern.match(line.strip()):
                groups = match.groupdict()
                message = groups.get("message") or (
                    f"patch failed at line {groups['line']}"
                    if groups.get("line")
                    else "conflict markers left"
                )
                found.setdefault(groups["path"], []).append(message)
                break
    return [{"path": path, "message": "; ".join(messages)} for path, messages in found.items()]


def apply_patch(sandbox_id: str, patch: str, *, check: bool, three_way: bool, actor: Actor) -> dict[str, Any]:
    sandbox = _running_sandbox(sandbox_id)
    flags = ["--check"] if check else []
    if three_way:
        flags.append("--3way")
    result = _run(sandbox_id, "apply", *flags, stdin=patch.encode("utf-8", errors="surrogateescape"))
    errors = result.stderr.decode(errors="replace")
    if "No valid patches in input" in errors or "corrupt patch" in errors or "unrecognized input" in errors:
        raise RpcError(ErrorCode.INVALID_PARAMS, _("This is not a patch git can read."))
    conflicts = _conflicts(errors)
    applied = not check and (
        result.exit_code == 0 or (three_way and any(line.startswith("U ") for line in errors.splitlines()))
    )
    if applied:
        _changed(sandbox, "patch.applied", actor)
    return {"applied": applied, "conflicts": conflicts, "valid": result.exit_code == 0}


# -- git -----------------------------------------------------------------------------------------------


def _git(
    sandbox_id: str,
    *args: str,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> ExecResult:
    return get_driver().exec(
        sandbox_id, ["git", *args], stdin=stdin, env=GIT_ENV | (env or {}), timeout=timeout
    )


def git_status(sandbox_id: str) -> dict[str, Any]:
    _running_sandbox(sandbox_id)
    result = _git(sandbox_id, "status", "--porcelain=v1", "-z", "--branch").checked()
    records = result.stdout.decode(errors="replace").split("\0")
    header = records[0][3:] if records and records[0].startswith("## ") else ""
    branch = header.split("...")[0].split(" ")[0]
    files, index = [], 1
    while index < len(records) and records[index]:
        record = records[index]
        entry = {"path": record[3:], "index": record[0], "worktree": record[1]}
        if record[0] in "RC":
            entry["oldPath"] = records[index + 1]
            index += 1
        files.append(entry)
        index += 1
    ahead = re.search(r"ahead (\d+)", header)
    behind = re.search(r"behind (\d+)", header)
    return {
        "branch": branch,
        "ahead": int(ahead[1]) if ahead else 0,
        "behind": int(behind[1]) if behind else 0,
        "files": files,
    }


AUTHOR = re.compile(r"^(?P<name>[^<>]+?)\s*<(?P<email>[^<>\s]+)>$")


def git_commit(
    sandbox_id: str, message: str, paths: list[str] | None, author: str | None, *, actor: Actor
) -> dict[str, Any]:
    sandbox = _running_sandbox(sandbox_id)
    env = {}
    if author:
        match = AUTHOR.match(author)
        if not match:
            raise RpcError(ErrorCode.INVALID_PARAMS, _('The author must look like "Name <email>".'))
        env = {"GIT_AUTHOR_NAME": match["name"], "GIT_AUTHOR_EMAIL": match["email"]}
    relative = [posixpath.relpath(normalize(path), WORKSPACE) for path in paths or []]
    _git(sandbox_id, "add", "-A", "--", *relative).checked()
    committed = _git(sandbox_id, "commit", "--quiet", "--file=-", stdin=message.encode(), env=env)
    if committed.exit_code != 0:
        output = (committed.stdout + committed.stderr).decode(errors="replace")
        if "nothing to commit" in output or "no changes added" in output:
            raise RpcError(ErrorCode.CONFLICT, _("There is nothing to commit."))
        raise DriverError(output.strip()[-500:])
    commit = _git(sandbox_id, "rev-parse", "HEAD").stdout.decode().strip()
    _changed(sandbox, "git.committed", actor, commit=commit[:12])
    return {"commit": commit}


def _remote_url(sandbox_id: str, remote: str, *, push: bool = False) -> str:
    result = _git(sandbox_id, "remote", "get-url", *(["--push"] if push else []), "--", remote)
    if result.exit_code != 0:
        raise RpcError(ErrorCode.NOT_FOUND, _("The remote %(remote)s does not exist."), remote=remote)
    return result.stdout.decode(errors="replace").strip()


def _github_base() -> str:
    return config.get_settings()["git"]["githubUrl"].rstrip("/")


def _github_repository(sandbox_id: str, remote: str, *, push: bool = False) -> tuple[str, str, str]:
    """The remote's URL, owner and name. The sandbox configured it, so anything but a repository on
    the configured GitHub host (file paths, ssh, ext::, other hosts, dot segments) is refused."""
    url = _remote_url(sandbox_id, remote, push=push)
    base = _github_base()
    match = re.fullmatch(re.escape(base) + r"/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url, re.ASCII)
    if not match or {match[1], match[2]} & {".", ".."}:
        raise RpcError(
            ErrorCode.FORBIDDEN,
            _(
                "The remote %(remote)s is not a repository on %(host)s: "
                "cocoon pushes and opens pull requests only there."
            ),
            remote=remote,
            host=base,
        )
    return url, match[1], match[2]


def git_push(sandbox_id: str, branch: str, remote: str = "origin", *, actor: Actor) -> dict[str, Any]:
    sandbox = _running_sandbox(sandbox_id)
    if not BRANCH.match(branch):
        raise RpcError(ErrorCode.INVALID_PARAMS, _("%(branch)s is not a valid branch name."), branch=branch)
    if not REMOTE.match(remote):
        raise RpcError(ErrorCode.INVALID_PARAMS, _("%(remote)s is not a valid remote name."), remote=remote)
    url = _github_repository(sandbox_id, remote, push=True)[0]
    gitpush.push(sandbox_id, url, _github_base(), branch)
    _changed(sandbox, "git.pushed", actor, branch=branch)
    return {"remote": remote, "branch": branch}


def create_pull_request(
    sandbox_id: str, title: str, body: str, base: str, head: str, remote: str = "origin", *, actor: Actor
) -> dict[str, Any]:
    sandbox = _running_sandbox(sandbox_id)
    _url, owner, name = _github_repository(sandbox_id, remote)
    token = vault.read_secret("GITHUB_TOKEN")
    if not token:
        raise RpcError(ErrorCode.CONFLICT, _("The secret GITHUB_TOKEN is not set."))
    api = config.get_settings()["git"]["githubApiUrl"].rstrip("/")
    try:
        response = httpx.post(
            f"{api}/repos/{owner}/{name}/pulls",
            json={"title": title, "body": body, "base": base, "head": head},
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
            },
            timeout=30,
        )
    except httpx.HTTPError as error:
        raise RpcError(ErrorCode.UNAVAILABLE, details={"github": str(error)[:500]}) from error
    if response.status_code != 201:
        message = (
            response.json().get("message", "")
            if response.headers.get("content-type", "").startswith("application/json")
            else ""
        )
        raise RpcError(
            ErrorCode.CONFLICT,
            _("GitHub refused the pull request."),
            details={"status": response.status_code, "github": message[:500]},
        )
    pull = response.json()
    _changed(sandbox, "git.pr_created", actor, number=pull["number"])
    return {"number": pull["number"], "url": pull.get("html_url", "")}
