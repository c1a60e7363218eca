"""Pushing a sandbox's commits without GITHUB_TOKEN ever meeting git the sandbox controls (SPEC §5).

git in a sandbox runs whatever the sandbox configured (hooks, credential helpers, fsmonitor, filters,
ssh commands) and any process there can read its environment, so the token never goes in. The sandbox
only bundles its commits; the bundle leaves through the driver's exec in bounded reads and is treated
as hostile bytes: it is fetched into a fresh bare repository in a host temp folder, with no hooks, no
helpers, no config, attributes or environment from anyone, checked by a strict fsck, and pushed from
there. Only that host-side git gets the token, as an http.extraHeader scoped to the GitHub host.
"""

import base64
import os
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from django.utils.translation import gettext_lazy as _

from cocoon import vault
from cocoon.errors import ErrorCode, RpcError
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import MAX_EXEC_OUTPUT, ExecResult
from sandboxes.services import GIT_ENV

MAX_BUNDLE_BYTES = 512 * 1024 * 1024
CHUNK_BYTES = MAX_EXEC_OUTPUT - 4096  # one read's output, with room for the first read's header line
TIMEOUT_S = 600
# A small bundle can still expand (deltas) into huge objects: host-side git gets bounded memory and files.
LIMITS = ["prlimit", f"--as={4 * 1024**3}", f"--fsize={2 * MAX_BUNDLE_BYTES}", "--"]
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

# In the sandbox: bundle HEAD with its history into a temp file, answer "<size> <path>" and the first
# chunk; a bundle that fits in that chunk is removed at once.
BUNDLE = """
umask 077
bundle=$(mktemp) || exit 3
git bundle create --quiet "$bundle" HEAD || { rm -f -- "$bundle"; exit 3; }
size=$(stat -c %s -- "$bundle")
printf '%s %s\\n' "$size" "$bundle"
head -c "$1" -- "$bundle"
[ "$size" -gt "$1" ] || rm -f -- "$bundle"
"""
READ = 'tail -c "+$2" -- "$1" | head -c "$3"'

UNVERIFIED = _("The commits from the sandbox failed verification and were not pushed.")


def _sandbox(sandbox_id: str, script: str, *args: str) -> ExecResult:
    command = ["sh", "-c", script, "gitpush", *args]
    return get_driver().exec(sandbox_id, command, env=GIT_ENV, timeout=TIMEOUT_S)


def _complaint(stderr: bytes) -> str:
    """git's error lines (fsck puts the one that matters first, fetch last), bounded."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("error", "fatal"))] or lines[-1:]
    return "\n".join(errors)[:500]


def _refuse(result: ExecResult | subprocess.CompletedProcess) -> RpcError:
    return RpcError(ErrorCode.CONFLICT, UNVERIFIED, details={"git": _complaint(result.stderr)})


def _take_bundle(sandbox_id: str, target: Path) -> None:
    """The sandbox's bundle of HEAD, copied into target; never more than MAX_BUNDLE_BYTES are read."""
    first = _sandbox(sandbox_id, BUNDLE, str(CHUNK_BYTES))
    if first.exit_code != 0:
        raise RpcError(
            ErrorCode.CONFLICT,
            _("The sandbox has no commits that could be bundled."),
            details={"git": _complaint(first.stderr)},
        )
    header, _newline, data = first.stdout.partition(b"\n")
    size_text, _space, path = header.decode(errors="replace").partition(" ")
    if not size_text.isdigit() or not path:
        raise _refuse(first)
    size = int(size_text)
    if size > MAX_BUNDLE_BYTES:
        _sandbox(sandbox_id, 'rm -f -- "$1"', path)
        raise RpcError(
            ErrorCode.CONFLICT,
            _("The commits to push are larger than %(limit)s MB."),
            limit=MAX_BUNDLE_BYTES // 1024**2,
        )
    try:
        with target.open("wb") as handle:
            handle.write(data)
            while (done := handle.tell()) < size and len(data) == CHUNK_BYTES:
                result = _sandbox(sandbox_id, READ, path, str(done + 1), str(min(CHUNK_BYTES, size - done)))
                data = result.stdout
                handle.write(data)
            if handle.tell() != size:  # the sandbox changed or cut its bundle while it was read
                raise _refuse(first)
    finally:
        if size > CHUNK_BYTES:
            _sandbox(sandbox_id, 'rm -f -- "$1"', path)


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
        self.git("init", "--quiet", "--bare", "--template=", str(self.path), git_dir=False)

    def git(
        self, *args: str, allow: str = "", env: dict[str, str] | None = None, git_dir: bool = True
    ) -> subprocess.CompletedProcess:
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
            raise RpcError(ErrorCode.TIMEOUT) from error


def _token_env(base: str) -> dict[str, str]:
    """GITHUB_TOKEN for the host-side push only, as GIT_CONFIG_* variables scoped to the GitHub host:
    never in argv, never in a file."""
    token = vault.read_secret("GITHUB_TOKEN")
    if not token:
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"http.{base}/.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


def push(sandbox_id: str, url: str, base: str, branch: str) -> None:
    """Push the sandbox's HEAD to branch at url, a repository on the GitHub host base (checked by the
    caller), from a host-side repository that holds only verified objects."""
    with tempfile.TemporaryDirectory(prefix="cocoon-push-") as scratch:
        bundle = Path(scratch) / "push.bundle"
        _take_bundle(sandbox_id, bundle)
        repository = HostRepository(Path(scratch))
        ref = f"refs/heads/{branch}"
        fetched = repository.git(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            str(bundle),
            f"+HEAD:{ref}",
            allow="file",
        )
        if fetched.returncode != 0:
            raise _refuse(fetched)
        checked = repository.git("fsck", "--strict", "--no-dangling", "--no-progress", "--no-reflogs")
        if checked.returncode != 0:
            raise _refuse(checked)
        if repository.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode != 0:
            raise _refuse(fetched)
        pushed = repository.git(
            "push", "--porcelain", "--", url, f"{ref}:{ref}", allow=urlsplit(url).scheme, env=_token_env(base)
        )
        if pushed.returncode != 0:
            raise RpcError(
                ErrorCode.CONFLICT, _("The push was refused."), details={"git": _complaint(pushed.stderr)}
            )
