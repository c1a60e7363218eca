"""BwrapDriver: a sandbox's lifecycle (its folder and keeper), exec, terminals, toolbox and archives."""

import io
import json
import math
import os
import secrets
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings

from sandboxes.choices import Capability, SandboxState
from sandboxes.drivers.base import (
    AGENT_USER,
    OPT_COCOON,
    TMUX_SOCKET,
    TOOLBOX_MANIFEST,
    WORKSPACE,
    DriverError,
    EngineState,
    ExecResult,
    FoundSandbox,
    Limits,
    SandboxDriver,
    SandboxNotFound,
    SandboxSpec,
    TtySession,
)
from sandboxes.drivers.bwrap import args, keeper
from sandboxes.drivers.bwrap.args import BASE_ENV, GROUP, PASSWD, SANDBOX_PATH, SUBDIRS
from sandboxes.drivers.bwrap.keeper import POLL_S, START_TIMEOUT_S
from sandboxes.drivers.bwrap.output import bounded_communicate
from sandboxes.drivers.bwrap.terminal import BwrapTty

EXEC_GRACE_S = 5  # past the in-sandbox `timeout`, how long cocoond waits before it gives up on an exec


MEMBER_MARK = "member"  # in a warm pool member's folder until a claim (SandboxSpec.pool_member)


class BwrapDriver(SandboxDriver):
    kind = "bwrap"

    def __init__(self) -> None:
        if os.getuid() == 0:
            # Root hands sandboxes to an unprivileged host user, who could not traverse the 0700
            # COCOON_DATA; so their folders live under a base of their own (0711).
            self.base = Path(settings.COCOON_BWRAP_ROOT) / settings.COCOON_INSTANCE
            self.host_uid = self.host_gid = settings.COCOON_BWRAP_UID
        else:
            self.base = Path(settings.DATA_DIR)
            self.host_uid, self.host_gid = os.getuid(), os.getgid()
        self.root = self.base / "sandboxes"
        self.toolbox = self.base / "agents"

    # -- engine facts ---------------------------------------------------------------------------

    def capabilities(self) -> list[str]:
        return [str(Capability.TTY), str(Capability.ARCHIVE)]

    def image_exists(self, image: str) -> bool:
        return True  # there are no images: the host's read-only root is the image

    def ensure_networks(self, *modes: str) -> None:
        """Nothing to create: "none" is an empty net namespace, the others share the host's."""

    # -- places ---------------------------------------------------------------------------------

    def folder(self, sandbox_id: str) -> Path:
        if not sandbox_id.startswith("sb_") or "/" in sandbox_id:
            raise SandboxNotFound(sandbox_id)
        return self.root / sandbox_id

    # -- the keeper and entering it -------------------------------------------------------------

    def _keeper_pid(self, sandbox_id: str) -> int | None:
        """The host PID of the sandbox's PID 1, if that very process still runs (not a reused PID)."""
        return keeper.read_pid(self.folder(sandbox_id))

    def _running_keeper(self, sandbox_id: str) -> int:
        pid = self._keeper_pid(sandbox_id)
        if pid is None:
            raise DriverError(f"sandbox {sandbox_id} is not running")
        return pid

    def _enter(self, sandbox_id: str, command: list[str], workdir: str) -> list[str]:
        """A command line that runs `command` inside the sandbox's namespaces as its agent user, with
        no capabilities and no way to gain any: only then does it touch anything of the sandbox's."""
        return args.enter(self._running_keeper(sandbox_id), command, workdir)

    def _environment(self, sandbox_id: str, extra: dict[str, str] | None) -> dict[str, str]:
        spec = json.loads((self.folder(sandbox_id) / "spec.json").read_text())
        env: dict[str, str] = spec.get("env", {})
        return BASE_ENV | env | (extra or {})

    def popen(
        self, sandbox_id: str, command: list[str], env: dict[str, str], workdir: str, **kwargs: Any
    ) -> subprocess.Popen[bytes]:
        """command entered into the sandbox (see _enter), with the sandbox's environment and env."""
        # Supplementary groups are dropped before entering (root's would otherwise ride along, and a
        # user namespace may refuse setgroups once inside).
        groups: dict[str, Any] = {"extra_groups": []} if os.getuid() == 0 else {}
        return subprocess.Popen(
            self._enter(sandbox_id, command, workdir),
            env=self._environment(sandbox_id, env),
            umask=0o022,  # cocoond's own is private; a sandbox's files are made as a login shell would
            **groups,
            **kwargs,
        )

    # -- lifecycle ------------------------------------------------------------------------------

    def create(self, spec: SandboxSpec) -> EngineState:
        folder = self.folder(spec.sandbox_id)
        self.root.mkdir(parents=True, exist_ok=True)
        if os.getuid() == 0:  # the sandbox user must traverse (not list) down to its folder
            for parent in (Path(settings.COCOON_BWRAP_ROOT), self.base, self.root):
                parent.chmod(0o711)
        folder.mkdir()  # fails for an existing sandbox, which is then left alone
        folder.chmod(0o711)
        try:
            for name in SUBDIRS:
                (folder / name).mkdir(mode=0o700)
                os.chown(folder / name, self.host_uid, self.host_gid)
            if spec.workspace is not None:
                self._seed_workspace(folder / "workspace", spec.workspace.archive)
            # cocoond's own file (the folder is root's, the sandbox user only traverses it): what the
            # sandbox was made as, and by which data directory (the root may outlive it, as root's is
            # outside the data directory).
            made = {"network": spec.network, "hostname": spec.hostname, "env": spec.env}
            made |= {"data": settings.COCOON_DATA_ID, "image": spec.image, "limits": asdict(spec.limits)}
            (folder / "spec.json").write_text(json.dumps(made))
            if spec.pool_member:
                (folder / MEMBER_MARK).touch()
            return self.start(spec.sandbox_id)
        except Exception as error:
            self.remove(spec.sandbox_id)
            raise error if isinstance(error, DriverError) else DriverError(str(error)) from error

    def _seed_workspace(self, workspace: Path, archive: bytes) -> None:
        """Extract cocoon's own baseline archive (never one from a sandbox) into a new workspace."""
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(workspace, filter="data")
        for path in [workspace, *workspace.rglob("*")]:
            os.chown(path, self.host_uid, self.host_gid, follow_symlinks=False)

    def start(self, sandbox_id: str) -> EngineState:
        folder = self.folder(sandbox_id)
        if not folder.is_dir():
            raise SandboxNotFound(sandbox_id)
        if self._keeper_pid(sandbox_id) is not None:
            return self.inspect(sandbox_id)
        spec = json.loads((folder / "spec.json").read_text())
        # A copy of the status script and hook files where the sandbox user can reach them (the
        # checkout cocoon runs from may not be); refreshed on every start.
        shutil.copytree(OPT_COCOON, self.base / "opt-cocoon", dirs_exist_ok=True)
        for path in [self.base / "opt-cocoon", *(self.base / "opt-cocoon").rglob("*")]:
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
        opened: list[int] = []
        try:
            fds = {
                name: os.open(folder / name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW) for name in SUBDIRS
            }
            opened += fds.values()
            for name, content in (("passwd", PASSWD), ("group", GROUP)):
                read, write = os.pipe()
                os.write(write, content.encode())
                os.close(write)
                fds[name] = read
                opened.append(read)
            info, fds["info"] = os.pipe()
            opened.append(fds["info"])
            read_args, write_args = os.pipe()
            opened.append(read_args)
            options = args.bwrap_args(folder, self.base, self.toolbox, spec, fds)
            with os.fdopen(write_args, "wb") as pipe:
                pipe.write(b"\0".join(option.encode() for option in options) + b"\0")
            log = open(folder / "keeper.log", "ab")  # noqa: SIM115 - handed to the keeper
            subprocess.Popen(
                # Options come through the pipe; only the keeper's own command is on the command line.
                # -D: in the foreground, and kept when it has no session.
                args.as_sandbox_user(
                    [
                        "bwrap",
                        "--args",
                        str(read_args),
                        "--",
                        args.binary("tmux"),
                        "-L",
                        TMUX_SOCKET,
                        "-D",
                        "-f",
                        "/dev/null",
                    ],
                    self.host_uid,
                    self.host_gid,
                ),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={"PATH": SANDBOX_PATH},
                pass_fds=opened,
                start_new_session=True,  # the keeper must outlive cocoond
            )
            log.close()
        finally:
            for fd in opened:
                os.close(fd)
        with os.fdopen(info, "rb") as pipe:
            pid = keeper.wait_started(pipe, lambda: (folder / "keeper.log").read_text()[-500:])
        keeper.record(folder, pid)
        return self.inspect(sandbox_id)

    def _kill_everything(self, sandbox_id: str) -> None:
        """End every process of the sandbox: killing a PID namespace's PID 1 ends all of them."""
        keeper.kill(self.folder(sandbox_id))

    def stop(self, sandbox_id: str) -> EngineState:
        if not self.folder(sandbox_id).is_dir():
            raise SandboxNotFound(sandbox_id)
        self._kill_everything(sandbox_id)
        deadline = time.monotonic() + START_TIMEOUT_S
        while self._keeper_pid(sandbox_id) is not None and time.monotonic() < deadline:
            time.sleep(POLL_S)
        return self.inspect(sandbox_id)

    def remove(self, sandbox_id: str) -> None:
        folder = self.folder(sandbox_id)
        self._kill_everything(sandbox_id)
        # rmtree does not follow symlinks the sandbox may have planted.
        shutil.rmtree(folder, ignore_errors=True)

    def inspect(self, sandbox_id: str) -> EngineState:
        if not self.folder(sandbox_id).is_dir():
            return EngineState(state=SandboxState.MISSING)
        alive = self._keeper_pid(sandbox_id) is not None
        return EngineState(state=SandboxState.RUNNING if alive else SandboxState.STOPPED)

    def list_ids(self) -> set[str]:
        if not self.root.is_dir():
            return set()
        return {entry.name for entry in self.root.iterdir() if entry.name.startswith("sb_")}

    def owners(self) -> dict[str, str]:
        return {sandbox_id: self._made(sandbox_id).get("data", "") for sandbox_id in self.list_ids()}

    def members(self) -> set[str]:
        return {
            sandbox_id for sandbox_id in self.list_ids() if (self.folder(sandbox_id) / MEMBER_MARK).exists()
        }

    def release_member(self, sandbox_id: str) -> None:
        (self.folder(sandbox_id) / MEMBER_MARK).unlink(missing_ok=True)

    def describe(self, sandbox_id: str) -> FoundSandbox:
        made = self._made(sandbox_id)
        try:
            return FoundSandbox(image=made["image"], network=made["network"], limits=Limits(**made["limits"]))
        except (KeyError, TypeError):
            raise DriverError(
                f"sandbox {sandbox_id} was made before bwrap folders kept a description"
            ) from None

    def _made(self, sandbox_id: str) -> dict[str, Any]:
        """The sandbox's spec.json ({} when a remove under way took it)."""
        try:
            made = json.loads((self.folder(sandbox_id) / "spec.json").read_text())
        except (OSError, ValueError):
            return {}
        return made if isinstance(made, dict) else {}

    # -- exec -----------------------------------------------------------------------------------

    def exec(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        user: str = AGENT_USER,
        workdir: str = WORKSPACE,
        timeout: float = 60,
    ) -> ExecResult:
        if user != AGENT_USER:
            raise DriverError("bwrap sandboxes have only the agent user")
        limit = max(1, math.ceil(timeout))
        # `timeout` inside the sandbox ends the command; cocoond's own deadline is the backstop.
        process = self.popen(
            sandbox_id,
            ["/usr/bin/timeout", "-k", "2", str(limit), *command],
            env or {},
            workdir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        stdout, stderr, truncated, finished = bounded_communicate(process, stdin, limit + EXEC_GRACE_S)
        if not finished:
            return ExecResult(-1, stdout, stderr, timed_out=True, truncated=truncated)
        exit_code = process.returncode
        return ExecResult(exit_code, stdout, stderr, timed_out=exit_code in {124, 137}, truncated=truncated)

    def open_tty(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        cols: int = 80,
        rows: int = 24,
        env: dict[str, str] | None = None,
        user: str = AGENT_USER,
        workdir: str = WORKSPACE,
    ) -> TtySession:
        if user != AGENT_USER:
            raise DriverError("bwrap sandboxes have only the agent user")
        return BwrapTty(
            self, sandbox_id, command, {"TERM": "xterm-256color"} | (env or {}), workdir, cols, rows
        )

    # -- toolbox and files ------------------------------------------------------------------------

    def install_toolbox(self, source: Path) -> None:
        staging = self.toolbox.with_name(f".agents-{secrets.token_hex(4)}")
        shutil.copytree(source, staging, symlinks=True)
        staging.chmod(0o755)
        old = self.toolbox.with_name(f".agents-old-{secrets.token_hex(4)}")
        if self.toolbox.exists():
            self.toolbox.rename(old)
        staging.rename(self.toolbox)
        shutil.rmtree(old, ignore_errors=True)

    def toolbox_manifest(self) -> dict[str, Any] | None:
        path = self.toolbox / TOOLBOX_MANIFEST
        return json.loads(path.read_text()) if path.is_file() else None

    def put_archive(self, sandbox_id: str, path: str, data: bytes) -> None:
        # Extracted inside the sandbox: a symlink in the workspace can never point the host anywhere.
        self.exec(sandbox_id, ["tar", "-x", "-f", "-", "-C", path], stdin=data, timeout=300).checked()

    def get_archive(self, sandbox_id: str, path: str) -> Iterator[bytes]:
        parent, name = os.path.split(path.rstrip("/")) if path.rstrip("/") else ("/", ".")
        result = self.exec(sandbox_id, ["tar", "-c", "-f", "-", "-C", parent or "/", name], timeout=300)
        return iter([result.checked().stdout])
