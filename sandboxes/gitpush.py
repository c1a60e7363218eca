"""Pushing a sandbox's commits without GITHUB_TOKEN ever meeting git the sandbox controls (SPEC §5).

git in a sandbox runs whatever the sandbox configured (hooks, credential helpers, fsmonitor, filters,
ssh commands) and any process there can read its environment, so the token never goes in. The sandbox
only bundles the commits the remote lacks; the bundle leaves through the driver's exec in bounded reads
and is treated as hostile bytes: it is fetched into a fresh bare repository in a host temp folder, with
no hooks, no helpers, no config, attributes or environment from anyone, on top of the commits it builds
on (fetched from the remote itself, one level deep), checked by a strict fsck, and pushed from there.
Only that host-side git gets the token, as an http.extraHeader scoped to the GitHub host.
"""

import base64
import os
import re
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from django.utils.translation import gettext_lazy as _

from cocoon import vault
from cocoon.errors import Conflict, Timeout
from sandboxes.baseline import GIT_ENV
from sandboxes.drivers.base import MAX_EXEC_OUTPUT, ExecResult
from sandboxes.nodes import driver_of

MAX_BUNDLE_BYTES = 512 * 1024 * 1024
CHUNK_BYTES = MAX_EXEC_OUTPUT - 4096  # one read's output, with room for the first read's header line
TIMEOUT_S = 600
# A small bundle can still expand (deltas) into huge objects in memory: host-side git gets bounded memory.
# (What it writes of the sandbox's data is the bundle's pack, bounded by MAX_BUNDLE_BYTES.)
LIMITS = ["prlimit", f"--as={4 * 1024**3}", "--"]
# For every host-side git command: nothing runs but git, every object is checked as it arrives, no
# transport is allowed unless a step names it, and no redirect leads the token to another host.
CONFIG = {
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "credential.helper": "",
    "transfer.fsckObjects": "true",
    "protocol.allow": "never",
    "http.followRedirects": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "pack.threads": "1",
}
# Of cocoond's own environment only what finds git and the way out to the git host.
PASSED_ENV = ("PATH", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR")

# In the sandbox: bundle HEAD without the commits the remote already has (their ids come on stdin),
# answer "<size> <path> <HEAD id>" and the first chunk; a bundle that fits in that chunk is removed at
# once. When the remote has HEAD already there is nothing to bundle: "0 - <HEAD id>".
BUNDLE = """
umask 077
tip=$(git rev-parse --verify --quiet 'HEAD^{commit}') || exit 3
known=$(git cat-file --batch-check='%(objectname) %(objecttype)' | awk '$2 == "commit" { print "^" $1 }')
if [ -z "$(printf '%s\\n' "$known" | git rev-list -n 1 HEAD --stdin)" ]; then
  printf '0 - %s\\n' "$tip"; exit 0
fi
bundle=$(mktemp) || exit 3
printf '%s\\n' "$known" | git bundle create --quiet "$bundle" HEAD --stdin || { rm -f -- "$bundle"; exit 3; }
size=$(stat -c %s -- "$bundle")
printf '%s %s %s\\n' "$size" "$bundle" "$tip"
head -c "$1" -- "$bundle"
[ "$size" -gt "$1" ] || rm -f -- "$bundle"
"""
FETCH = ("fetch", "--quiet", "--no-tags", "--no-write-fetch-head")
READ = 'tail -c "+$2" -- "$1" | head -c "$3"'
OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
MAX_PREREQUISITES = 1000
MAX_HEADER_BYTES = 1024 * 1024

UNVERIFIED = _("The commits from the sandbox failed verification and were not pushed.")


def _sandbox(sandbox_id: str, script: str, *args: str) -> ExecResult:
    command = ["sh", "-c", script, "gitpush", *args]
    return driver_of(sandbox_id).exec(sandbox_id, command, env=GIT_ENV, timeout=TIMEOUT_S)


def _complaint(stderr: bytes) -> str:
    """git's error lines (fsck puts the one that matters first, fetch last), bounded."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("error", "fatal"))] or lines[-1:]
    return "\n".join(errors)[:500]


def _unverified(result: ExecResult | subprocess.CompletedProcess[bytes]) -> Conflict:
    return Conflict(UNVERIFIED, details={"git": _complaint(result.stderr)})


def _push_refused(result: subprocess.CompletedProcess[bytes]) -> Conflict:
    return Conflict(_("The push was refused."), details={"git": _complaint(result.stderr)})


def _take_bundle(sandbox_id: str, target: Path, known: list[str]) -> str | None:
    """Copy the sandbox's bundle of HEAD (without the known commits) into target, never reading more
    than MAX_BUNDLE_BYTES; answers HEAD's id when the remote has it already and there is no bundle."""
    first = driver_of(sandbox_id).exec(
        sandbox_id,
        ["sh", "-c", BUNDLE, "bundle", str(CHUNK_BYTES)],
        stdin="".join(f"{oid}\n" for oid in known).encode(),
        env=GIT_ENV,
        timeout=TIMEOUT_S,
    )
    if first.exit_code != 0:
        raise Conflict(
            _("The sandbox has no commits that could be bundled."),
            details={"git": _complaint(first.stderr)},
        )
    header, _newline, data = first.stdout.partition(b"\n")
    fields = header.decode(errors="replace").split(" ")
    if len(fields) != 3 or not fields[0].isdigit() or not OBJECT_ID.fullmatch(fields[2]):
        raise _unverified(first)
    size, path, tip = int(fields[0]), fields[1], fields[2]
    if size == 0:
        return tip
    try:
        if size > MAX_BUNDLE_BYTES:
            raise Conflict(
                _("The commits to push are larger than %(limit)s MB."),
                limit=MAX_BUNDLE_BYTES // 1024**2,
            )
        with target.open("wb") as handle:
            handle.write(data)
            while (done := handle.tell()) < size and len(data) == CHUNK_BYTES:
                data = _sandbox(
                    sandbox_id, READ, path, str(done + 1), str(min(CHUNK_BYTES, size - done))
                ).stdout
                handle.write(data)
            if handle.tell() != size:  # the sandbox changed or cut its bundle while it was read
                raise _unverified(first)
    finally:
        if size > CHUNK_BYTES:
            _sandbox(sandbox_id, 'rm -f -- "$1"', path)
    return None


def _prerequisites(bundle: Path) -> list[str]:
    """The commits a bundle says it builds on (its header's "-<id>" lines), bounded and well-formed."""
    with bundle.open("rb") as handle:
        header = handle.read(MAX_HEADER_BYTES)
    lines = header.split(b"\n\n", 1)[0].decode(errors="replace").splitlines()
    ids = [line[1:].split(" ", 1)[0] for line in lines if line.startswith("-")]
    if len(ids) > MAX_PREREQUISITES or not all(OBJECT_ID.fullmatch(oid) for oid in ids):
        raise Conflict(UNVERIFIED, details={"git": "bad bundle header"})
    return ids


class HostRepository:
    """A bare repository of cocoond's own, in a temp folder, run with a minimal environment."""

    def __init__(self, scratch: Path) -> None:
        home = scratch / "home"
        home.mkdir()
        self.path = scratch / "repository.git"
        self.env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ} | {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home),
            "TMPDIR": str(scratch),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }
        created = self.git("init", "--quiet", "--bare", "--template=", str(self.path), git_dir=False)
        if created.returncode != 0:
            raise RuntimeError(f"git init failed: {_complaint(created.stderr)}")

    def git(
        self, *args: str, allow: str = "", env: dict[str, str] | None = None, git_dir: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        config = CONFIG | ({f"protocol.{allow}.allow": "always"} if allow else {})
        command = [
            *LIMITS,
            "git",
            *(arg for key, value in config.items() for arg in ("-c", f"{key}={value}")),
        ]
        if git_dir:
            command.append(f"--git-dir={self.path}")
        try:
            return subprocess.run(
                [*command, *args],
                env=self.env | (env or {}),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            raise Timeout() from error


def _token_env(base: str, project: str) -> dict[str, str]:
    """GITHUB_TOKEN (the project's, or the server's where it may use them) for the host-side push only,
    as GIT_CONFIG_* variables scoped to the GitHub host: never in argv, never in a file."""
    token = vault.read_secret("GITHUB_TOKEN", project)
    if not token:
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"http.{base}/.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


def push(sandbox_id: str, url: str, base: str, branch: str, *, project: str) -> None:
    """Push the sandbox's HEAD to branch at url, a repository on the GitHub host base (checked by the
    caller), from a host-side repository that holds only verified objects. A push costs its new
    commits, not the repository's history."""
    scheme, token = urlsplit(url).scheme, _token_env(base, project)
    with tempfile.TemporaryDirectory(prefix="cocoon-push-") as scratch:
        repository = HostRepository(Path(scratch))
        listed = repository.git("ls-remote", "--heads", "--", url, allow=scheme, env=token)
        if listed.returncode != 0:
            raise _push_refused(listed)
        known = [line.split("\t", 1)[0] for line in listed.stdout.decode(errors="replace").splitlines()]
        bundle = Path(scratch) / "push.bundle"
        tip = _take_bundle(sandbox_id, bundle, [oid for oid in known if OBJECT_ID.fullmatch(oid)])
        ref = f"refs/heads/{branch}"
        if needed := [tip] if tip else _prerequisites(bundle):
            fetched = repository.git(*FETCH, "--depth=1", "--", url, *needed, allow=scheme, env=token)
            if fetched.returncode != 0:
                raise _unverified(fetched)
        if tip:
            fetched = repository.git("update-ref", ref, tip)
        else:
            fetched = repository.git(*FETCH, str(bundle), f"+HEAD:{ref}", allow="file")
        if fetched.returncode != 0:
            raise _unverified(fetched)
        # Unbundling skips transfer.fsckObjects (git 2.39): every object is checked here instead.
        checked = repository.git("fsck", "--strict", "--no-dangling", "--no-progress", "--no-reflogs")
        if checked.returncode != 0:
            raise _unverified(checked)
        if repository.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode != 0:
            raise _unverified(fetched)
        pushed = repository.git("push", "--porcelain", "--", url, f"{ref}:{ref}", allow=scheme, env=token)
        if pushed.returncode != 0:
            raise _push_refused(pushed)
