"""The bubblewrap driver: a sandbox is a folder, COCOON_DATA/sandboxes/<id>, and a tmux "keeper".

The keeper is a tmux server running as PID 1's only child inside bwrap (own user, PID, IPC, UTS, cgroup
and, for network "none", net namespaces; no capabilities; the host read-only). It lives in its own
session, so it survives cocoond restarts. Every exec is a tmux window of the keeper; cocoond talks to it
as the sandbox's host user through the socket in the sandbox's runtime folder.

When cocoond runs as root, sandboxes run as an unprivileged host user (COCOON_BWRAP_UID), so that even
the read-only view of the host grants them no more than "other" permissions. bwrap's options are passed
through a pipe (--args FD), never on a command line, and bind sources as open file descriptors.

What it cannot do (see capabilities()): images, resource limits, enforced egress.
"""

import contextlib
import io
import json
import os
import pty
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import tarfile
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings

from sandboxes.choices import Capability, NetworkMode, SandboxState
from sandboxes.drivers.base import (
    AGENT_UID,
    AGENT_USER,
    MAX_EXEC_OUTPUT,
    OPT_COCOON,
    TOOLBOX,
    TOOLBOX_MANIFEST,
    WORKSPACE,
    DriverError,
    EngineState,
    ExecResult,
    SandboxDriver,
    SandboxNotFound,
    SandboxSpec,
    TtySession,
)

PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "agent:x:1000:1000:agent:/home/agent:/bin/bash\n"
    "nobody:x:65534:65534::/:/usr/sbin/nologin\n"
)
GROUP = "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n"
START_TIMEOUT_S = 10
POLL_S = 0.02
SUBDIRS = ("workspace", "home", "status")
SANDBOX_PATH = f"/opt/cocoon/bin:{TOOLBOX}/bin:/usr/local/bin:/usr/bin:/bin"
# Host-side tmux clients pass their environment (PATH at least) into the windows they create: give
# them nothing but what a sandbox should see.
CLIENT_ENV = {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8"}


def _tmux() -> str:
    binary = shutil.which("tmux")
    if binary is None:
        raise DriverError("tmux is not installed: run scripts/provision")
    return binary


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

    def run_dir(self, sandbox_id: str) -> Path:
        """Runtime sockets live outside COCOON_DATA, which the sandbox's host user cannot traverse."""
        if os.getuid() == 0:
            base = Path("/run/cocoon") / settings.COCOON_INSTANCE
        else:
            base = (
                Path(os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/cocoon-{os.getuid()}")
                / settings.COCOON_INSTANCE
            )
        return base / sandbox_id

    def socket(self, sandbox_id: str) -> Path:
        return self.run_dir(sandbox_id) / f"tmux-{AGENT_UID}" / "cocoon"

    # -- host-side commands as the sandbox's host user --------------------------------------------

    def _as_sandbox_user(self, command: list[str]) -> list[str]:
        if os.getuid() != 0:
            return command
        return [
            "setpriv",
            f"--reuid={self.host_uid}",
            f"--regid={self.host_gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--",
            *command,
        ]

    def _tmux(self, sandbox_id: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = self._as_sandbox_user([_tmux(), "-S", str(self.socket(sandbox_id)), *args])
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, env=CLIENT_ENV)
        if check and result.returncode != 0:
            raise DriverError(f"tmux {args[0]}: {result.stderr.strip()[:500]}")
        return result

    def _keeper_alive(self, sandbox_id: str) -> bool:
        if not self.socket(sandbox_id).exists():
            return False
        return self._tmux(sandbox_id, "has-session", "-t", "keeper", check=False).returncode == 0

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
                self._seed_workspace(folder / "workspace", spec.workspace)
            (folder / "spec.json").write_text(
                json.dumps({"network": spec.network, "hostname": spec.hostname, "env": spec.env})
            )
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

    def _bwrap_args(self, sandbox_id: str, spec: dict[str, Any], fds: dict[str, int]) -> list[str]:
        folder, run = self.folder(sandbox_id), self.run_dir(sandbox_id)
        args = [
            "--clearenv",  # nothing of cocoond's environment (tokens, URLs) reaches the sandbox
            "--unshare-user", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID),
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", spec["hostname"],
            "--new-session", "--cap-drop", "ALL",
            *_host_read_only(),
            "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/root",
            # Hide cocoon's data and every other sandbox; the binds below come from the host paths.
            "--tmpfs", "/home", "--tmpfs", str(settings.DATA_DIR), "--tmpfs", str(self.base),
            "--bind", str(folder / "workspace"), WORKSPACE,
            "--bind", str(folder / "home"), f"/home/{AGENT_USER}",
            "--dir", "/opt/cocoon",
            "--ro-bind", str(self.base / "opt-cocoon" / "bin"), "/opt/cocoon/bin",
            "--ro-bind", str(self.base / "opt-cocoon" / "hooks"), "/opt/cocoon/hooks",
            "--bind", str(folder / "status"), "/opt/cocoon/status",
            "--bind", str(run), "/run/cocoon",
            "--ro-bind-data", str(fds["passwd"]), "/etc/passwd",
            "--ro-bind-data", str(fds["group"]), "/etc/group",
            "--setenv", "HOME", f"/home/{AGENT_USER}",
            "--setenv", "USER", AGENT_USER,
            "--setenv", "LOGNAME", AGENT_USER,
            "--setenv", "SHELL", "/bin/bash",
            "--setenv", "TMUX_TMPDIR", "/run/cocoon",
            "--setenv", "PATH", SANDBOX_PATH,
            "--setenv", "LANG", "C.UTF-8",
            "--chdir", WORKSPACE,
        ]  # fmt: skip
        if spec["network"] == NetworkMode.NONE:
            args.append("--unshare-net")
        for name, value in spec.get("env", {}).items():  # the local egress proxy's variables
            args += ["--setenv", name, value]
        if self.toolbox.is_dir():
            args += ["--ro-bind", str(self.toolbox), TOOLBOX]
        return args

    def start(self, sandbox_id: str) -> EngineState:
        folder = self.folder(sandbox_id)
        if not folder.is_dir():
            raise SandboxNotFound(sandbox_id)
        if self._keeper_alive(sandbox_id):
            return self.inspect(sandbox_id)
        spec = json.loads((folder / "spec.json").read_text())
        # A copy of the status script and hook files where the sandbox user can reach them (the
        # checkout cocoon runs from may not be); refreshed on every start.
        shutil.copytree(OPT_COCOON, self.base / "opt-cocoon", dirs_exist_ok=True)
        for path in [self.base / "opt-cocoon", *(self.base / "opt-cocoon").rglob("*")]:
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
        run = self.run_dir(sandbox_id)
        run.parent.mkdir(parents=True, exist_ok=True)
        if os.getuid() == 0:
            for parent in (run.parent.parent, run.parent):
                parent.chmod(0o711)
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(run)
        run.mkdir(mode=0o700)
        os.chown(run, self.host_uid, self.host_gid)
        opened: list[int] = []
        try:
            fds = {
                name: os.open(folder / name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
                for name in SUBDIRS[:3]
            }
            fds["run"] = os.open(run, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
            opened += fds.values()
            for name, content in (("passwd", PASSWD), ("group", GROUP)):
                read, write = os.pipe()
                os.write(write, content.encode())
                os.close(write)
                fds[name] = read
                opened.append(read)
            read_args, write_args = os.pipe()
            opened.append(read_args)
            args = self._bwrap_args(sandbox_id, spec, fds)
            with os.fdopen(write_args, "wb") as pipe:
                pipe.write(b"\0".join(arg.encode() for arg in args) + b"\0")
            log = open(folder / "keeper.log", "ab")  # noqa: SIM115 - handed to the keeper
            subprocess.Popen(
                # Options come through the pipe; only the keeper's own command is on the command line:
                # PID 1's only child, a tmux server in the foreground.
                self._as_sandbox_user(
                    [
                        "bwrap",
                        "--args",
                        str(read_args),
                        "--",
                        _tmux(),
                        "-L",
                        "cocoon",
                        "-D",
                        "-f",
                        "/dev/null",
                    ]
                ),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=CLIENT_ENV,
                pass_fds=opened,
                start_new_session=True,  # the keeper must outlive cocoond
            )
            log.close()
        finally:
            for fd in opened:
                os.close(fd)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.socket(sandbox_id).exists():
            if time.monotonic() > deadline:
                raise DriverError(f"the keeper did not start: {(folder / 'keeper.log').read_text()[-500:]}")
            time.sleep(POLL_S)
        self._tmux(sandbox_id, "new-session", "-d", "-s", "keeper", "-n", "keeper", "sleep", "infinity")
        return self.inspect(sandbox_id)

    def _kill_everything(self, sandbox_id: str) -> None:
        """End every process of the sandbox. Killing the keeper alone is not enough: bwrap's PID 1
        waits for all its children, so a stray background process would keep the sandbox alive."""
        if self._keeper_alive(sandbox_id):
            self._tmux(sandbox_id, "new-window", "-d", "-t", "keeper:", "kill", "-KILL", "-1", check=False)

    def stop(self, sandbox_id: str) -> EngineState:
        if not self.folder(sandbox_id).is_dir():
            raise SandboxNotFound(sandbox_id)
        self._kill_everything(sandbox_id)
        deadline = time.monotonic() + START_TIMEOUT_S
        while self._keeper_alive(sandbox_id) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        return self.inspect(sandbox_id)

    def remove(self, sandbox_id: str) -> None:
        folder = self.folder(sandbox_id)
        self._kill_everything(sandbox_id)
        # rmtree does not follow symlinks the sandbox may have planted.
        shutil.rmtree(self.run_dir(sandbox_id), ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)

    def inspect(self, sandbox_id: str) -> EngineState:
        if not self.folder(sandbox_id).is_dir():
            return EngineState(state=SandboxState.MISSING)
        alive = self._keeper_alive(sandbox_id)
        return EngineState(state=SandboxState.RUNNING if alive else SandboxState.STOPPED)

    def list_ids(self) -> set[str]:
        if not self.root.is_dir():
            return set()
        return {entry.name for entry in self.root.iterdir() if entry.name.startswith("sb_")}

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
        if not self._keeper_alive(sandbox_id):
            raise DriverError(f"sandbox {sandbox_id} is not running")
        token = secrets.token_hex(8)
        exec_dir = self.run_dir(sandbox_id) / "exec" / token
        exec_dir.parent.mkdir(exist_ok=True, mode=0o700)
        os.chown(exec_dir.parent, self.host_uid, self.host_gid)
        exec_dir.mkdir(mode=0o700)
        os.chown(exec_dir, self.host_uid, self.host_gid)
        directory = os.open(exec_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            _write(directory, "stdin", stdin or b"")
            _write(
                directory,
                "env",
                "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items()).encode(),
            )
            for name in ("stdin", "env"):
                os.chown(name, self.host_uid, self.host_gid, dir_fd=directory)
            inside = f"/run/cocoon/exec/{token}"
            script = (
                f'D={inside}; . "$D/env"; "$@" <"$D/stdin" >"$D/stdout" 2>"$D/stderr"; '
                'echo $? >"$D/rc.tmp"; mv "$D/rc.tmp" "$D/rc"'
            )
            limit = max(1, int(timeout + 0.999))
            argv = ["sh", "-c", script, "exec", "timeout", "-k", "2", str(limit), *command]
            self._tmux(
                sandbox_id, "new-window", "-d", "-t", "keeper:", "-n", f"exec-{token}", "-c", workdir, *argv
            )
            deadline = time.monotonic() + limit + 5
            while (code := _read(directory, "rc", 32)) is None:
                if time.monotonic() > deadline:
                    self._tmux(sandbox_id, "kill-window", "-t", f"exec-{token}", check=False)
                    return ExecResult(
                        -1,
                        _read(directory, "stdout") or b"",
                        _read(directory, "stderr") or b"",
                        timed_out=True,
                    )
                time.sleep(POLL_S)
            stdout, stderr = _read(directory, "stdout") or b"", _read(directory, "stderr") or b""
            exit_code = int(code.strip() or -1)
            truncated = len(stdout) > MAX_EXEC_OUTPUT or len(stderr) > MAX_EXEC_OUTPUT
            return ExecResult(
                exit_code,
                stdout[:MAX_EXEC_OUTPUT],
                stderr[:MAX_EXEC_OUTPUT],
                timed_out=exit_code in {124, 137},
                truncated=truncated,
            )
        finally:
            os.close(directory)
            shutil.rmtree(exec_dir, ignore_errors=True)

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
        if not self._keeper_alive(sandbox_id):
            raise DriverError(f"sandbox {sandbox_id} is not running")
        session = f"tty-{secrets.token_hex(6)}"
        extra = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
        self._tmux(
            sandbox_id,
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            str(cols),
            "-y",
            str(rows),
            "-c",
            workdir,
            *extra,
            *command,
        )
        self._tmux(sandbox_id, "set-option", "-t", session, "status", "off")
        return BwrapTty(self, sandbox_id, session, cols, rows)

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
        result = self.exec(sandbox_id, ["tar", "-x", "-f", "-", "-C", path], stdin=data, timeout=300)
        if result.exit_code != 0:
            raise DriverError(result.stderr.decode(errors="replace")[:500])

    def get_archive(self, sandbox_id: str, path: str) -> Iterator[bytes]:
        parent, name = os.path.split(path.rstrip("/")) if path.rstrip("/") else ("/", ".")
        result = self.exec(sandbox_id, ["tar", "-c", "-f", "-", "-C", parent or "/", name], timeout=300)
        if result.exit_code != 0:
            raise DriverError(result.stderr.decode(errors="replace")[:500])
        return iter([result.stdout])


# Top-level host folders a sandbox gets its own (empty or private) version of instead.
PRIVATE_TOP_LEVEL = {"proc", "dev", "tmp", "run", "home", "root", "opt", "workspace", "lost+found"}


def _host_read_only() -> list[str]:
    """The host's root, read-only, entry by entry: a single --ro-bind / / would leave no room for
    the sandbox's own /workspace and /opt/cocoon mount points."""
    args: list[str] = []
    for entry in sorted(os.scandir("/"), key=lambda entry: entry.name):
        if entry.name in PRIVATE_TOP_LEVEL:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), entry.path]
        elif entry.is_dir():
            args += ["--ro-bind", entry.path, entry.path]
    args += ["--dir", "/opt"]
    for entry in sorted(os.scandir("/opt"), key=lambda entry: entry.name):
        if entry.name not in {"cocoon", "agents"}:
            args += ["--ro-bind", entry.path, entry.path]
    return args


def _write(directory: int, name: str, content: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=directory)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)


def _read(directory: int, name: str, limit: int = MAX_EXEC_OUTPUT + 1) -> bytes | None:
    """A regular file the sandbox wrote, never following a link it may have planted instead."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
    except (FileNotFoundError, OSError):
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(limit)


class BwrapTty(TtySession):
    """A tmux session of the keeper, attached through a PTY that cocoond opens itself."""

    def __init__(self, driver: BwrapDriver, sandbox_id: str, session: str, cols: int, rows: int) -> None:
        self.driver, self.sandbox_id, self.session = driver, sandbox_id, session
        self.master, slave = pty.openpty()
        self._set_size(cols, rows, slave)
        command = driver._as_sandbox_user(
            [_tmux(), "-S", str(driver.socket(sandbox_id)), "attach", "-t", session]
        )
        self.process = subprocess.Popen(
            command,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            env=CLIENT_ENV | {"TERM": "xterm-256color"},
        )
        os.close(slave)

    def _set_size(self, cols: int, rows: int, fd: int | None = None) -> None:
        import fcntl
        import struct

        fcntl.ioctl(
            self.master if fd is None else fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0)
        )

    def read(self, size: int = 65536) -> bytes:
        try:
            return os.read(self.master, size)
        except OSError:
            return b""

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def resize(self, cols: int, rows: int) -> None:
        self._set_size(cols, rows)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGWINCH)

    def close(self) -> None:
        self.driver._tmux(self.sandbox_id, "kill-session", "-t", self.session, check=False)
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        self.process.wait(timeout=10)
        os.close(self.master)
