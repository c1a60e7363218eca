"""The bubblewrap driver: a sandbox is a folder, COCOON_DATA/sandboxes/<id>, and a keeper process.

The keeper is a tmux server (the one agents run in) as the only child of bwrap's PID 1 (own user, PID,
IPC, UTS, cgroup and, for network "none", net namespaces; no capabilities; the host read-only). It lives
in its own session, so it survives cocoond restarts; PID 1's host PID and start time are kept in the
sandbox folder, out of the sandbox's reach.

Every exec and terminal enters the keeper's namespaces (nsenter) and drops to the agent user before it
runs anything: tmux servers and clients, hooks and scripts all run inside the sandbox. No host process
connects to, opens or follows anything a sandbox can write (a tmux client obeys its server, and a folder
the sandbox shares with the host can be swapped for a link at any time).

When cocoond runs as root, sandboxes run as an unprivileged host user (COCOON_BWRAP_UID), so that even
the read-only view of the host grants them no more than "other" permissions. bwrap's options are passed
through a pipe (--args FD), never on a command line, and bind sources as open file descriptors.

What it cannot do (see capabilities()): images, resource limits, enforced egress.
"""

import contextlib
import io
import json
import math
import os
import pty
import secrets
import selectors
import shutil
import signal
import subprocess
import tarfile
import termios
import threading
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
KEEPER = "keeper.json"  # the keeper's host PID and start time, in the folder no sandbox can see
SANDBOX_PATH = f"/opt/cocoon/bin:{TOOLBOX}/bin:/usr/local/bin:/usr/bin:/bin"
# What every process of a sandbox starts with; nothing of cocoond's own environment.
BASE_ENV = {
    "HOME": f"/home/{AGENT_USER}",
    "USER": AGENT_USER,
    "LOGNAME": AGENT_USER,
    "SHELL": "/bin/bash",
    "TMUX_TMPDIR": "/run/cocoon",
    "PATH": SANDBOX_PATH,
    "LANG": "C.UTF-8",
}
EXEC_GRACE_S = 5  # past the in-sandbox `timeout`, how long cocoond waits before it gives up on an exec


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
        try:
            record = json.loads((self.folder(sandbox_id) / KEEPER).read_text())
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return pid if _start_time(pid) == record.get("start") else None

    def _running_keeper(self, sandbox_id: str) -> int:
        pid = self._keeper_pid(sandbox_id)
        if pid is None:
            raise DriverError(f"sandbox {sandbox_id} is not running")
        return pid

    def _enter(self, sandbox_id: str, command: list[str], workdir: str) -> list[str]:
        """A command line that runs `command` inside the sandbox's namespaces as its agent user, with
        no capabilities and no way to gain any: only then does it touch anything of the sandbox's."""
        pid = self._running_keeper(sandbox_id)
        return [
            _binary("nsenter"), f"--target={pid}",
            "--user", "--mount", "--pid", "--ipc", "--uts", "--net", "--cgroup",
            f"--setuid={AGENT_UID}", f"--setgid={AGENT_UID}", "--root", "--wd",
            "--",
            # Whatever runs next has no capabilities (its user is not the namespace's root) and can
            # gain none. The sandbox's view of /usr is the host's, read-only: this is the real setpriv.
            "/usr/bin/setpriv", "--no-new-privs", "--inh-caps=-all",
            "--",
            "/usr/bin/env", "-C", workdir,
            *command,
        ]  # fmt: skip

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

    def _environment(self, sandbox_id: str, extra: dict[str, str] | None) -> dict[str, str]:
        spec = json.loads((self.folder(sandbox_id) / "spec.json").read_text())
        return BASE_ENV | spec.get("env", {}) | (extra or {})

    def _popen(self, sandbox_id: str, command: list[str], env: dict[str, str], workdir: str, **kwargs: Any):
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
        folder = self.folder(sandbox_id)
        args = [
            "--clearenv",  # nothing of cocoond's environment (tokens, URLs) reaches the sandbox
            "--unshare-user", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID),
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", spec["hostname"],
            "--new-session", "--cap-drop", "ALL",
            *_host_read_only(),
            "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/root",
            "--perms", "0700", "--dir", "/run/cocoon",  # tmux's sockets: the sandbox's own
            # Hide cocoon's data and every other sandbox; the binds below come from the host paths.
            "--tmpfs", "/home", "--tmpfs", str(settings.DATA_DIR), "--tmpfs", str(self.base),
            "--bind", str(folder / "workspace"), WORKSPACE,
            "--bind", str(folder / "home"), f"/home/{AGENT_USER}",
            "--dir", "/opt/cocoon",
            "--ro-bind", str(self.base / "opt-cocoon" / "bin"), "/opt/cocoon/bin",
            "--ro-bind", str(self.base / "opt-cocoon" / "hooks"), "/opt/cocoon/hooks",
            "--bind", str(folder / "status"), "/opt/cocoon/status",
            "--ro-bind-data", str(fds["passwd"]), "/etc/passwd",
            "--ro-bind-data", str(fds["group"]), "/etc/group",
            "--chdir", WORKSPACE,
            "--info-fd", str(fds["info"]),
        ]  # fmt: skip
        if spec["network"] == NetworkMode.NONE:
            args.append("--unshare-net")
        for name, value in (BASE_ENV | spec.get("env", {})).items():  # and the local egress proxy's
            args += ["--setenv", name, value]
        if self.toolbox.is_dir():
            args += ["--ro-bind", str(self.toolbox), TOOLBOX]
        return args

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
            args = self._bwrap_args(sandbox_id, spec, fds)
            with os.fdopen(write_args, "wb") as pipe:
                pipe.write(b"\0".join(arg.encode() for arg in args) + b"\0")
            log = open(folder / "keeper.log", "ab")  # noqa: SIM115 - handed to the keeper
            subprocess.Popen(
                # Options come through the pipe; only the keeper's own command is on the command line.
                # -D: in the foreground, and kept when it has no session.
                self._as_sandbox_user(
                    [
                        "bwrap",
                        "--args",
                        str(read_args),
                        "--",
                        _binary("tmux"),
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
                env={"PATH": SANDBOX_PATH},
                pass_fds=opened,
                start_new_session=True,  # the keeper must outlive cocoond
            )
            log.close()
        finally:
            for fd in opened:
                os.close(fd)
        with os.fdopen(info, "rb") as pipe:
            pid = _keeper_started(pipe, lambda: (folder / "keeper.log").read_text()[-500:])
        record = json.dumps({"pid": pid, "start": _start_time(pid)})
        (folder / f"{KEEPER}.tmp").write_text(record)
        (folder / f"{KEEPER}.tmp").rename(folder / KEEPER)
        return self.inspect(sandbox_id)

    def _kill_everything(self, sandbox_id: str) -> None:
        """End every process of the sandbox: killing a PID namespace's PID 1 ends all of them."""
        pid = self._keeper_pid(sandbox_id)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

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
        process = self._popen(
            sandbox_id,
            ["/usr/bin/timeout", "-k", "2", str(limit), *command],
            env or {},
            workdir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        stdout, stderr, truncated, finished = _bounded_communicate(process, stdin, limit + EXEC_GRACE_S)
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


def _binary(name: str) -> str:
    binary = shutil.which(name)
    if binary is None:
        raise DriverError(f"{name} is not installed: run scripts/provision")
    return binary


def _start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot: with the PID, it names one process for good."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_line.rsplit(")", 1)[-1].split()[19]  # field 22; the name before ")" may hold spaces


def _keeper_started(pipe: io.BufferedReader, log: Any) -> int:
    """The PID bwrap reports on its info pipe, once the sandbox is set up (its PID 1 has a child)."""
    ready = selectors.DefaultSelector()
    ready.register(pipe, selectors.EVENT_READ)
    if not ready.select(START_TIMEOUT_S):
        raise DriverError(f"the keeper did not start: {log()}")
    try:
        pid = int(json.loads(pipe.read(4096))["child-pid"])
    except (ValueError, KeyError, TypeError) as error:
        raise DriverError(f"the keeper did not start: {log()}") from error
    deadline = time.monotonic() + START_TIMEOUT_S
    while not Path(f"/proc/{pid}/task/{pid}/children").read_text().strip():
        if time.monotonic() > deadline:
            raise DriverError(f"the keeper did not start: {log()}")
        time.sleep(POLL_S)
    return pid


def _bounded_communicate(
    process: subprocess.Popen, stdin: bytes | None, timeout: float
) -> tuple[bytes, bytes, bool, bool]:
    """stdout and stderr of a process in a sandbox, each cut at MAX_EXEC_OUTPUT (the rest is read and
    dropped), whether anything was cut, and whether it ended before the deadline (else it is killed)."""
    stdin_pipe, stdout, stderr = process.stdin, process.stdout, process.stderr
    if stdin_pipe is None or stdout is None or stderr is None:
        raise ValueError("the process needs pipes for stdin, stdout and stderr")

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            stdin_pipe.write(stdin or b"")
        with contextlib.suppress(BrokenPipeError, OSError):
            stdin_pipe.close()

    threading.Thread(target=feed, daemon=True).start()
    output = {stdout: bytearray(), stderr: bytearray()}
    truncated = False
    streams = selectors.DefaultSelector()
    for stream in output:
        os.set_blocking(stream.fileno(), False)
        streams.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while streams.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        for key, _ in streams.select(remaining):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                streams.unregister(key.fileobj)
                continue
            buffer = output[key.fileobj]
            room = MAX_EXEC_OUTPUT - len(buffer)
            truncated |= len(chunk) > room
            buffer += chunk[: max(room, 0)]
    streams.close()
    try:
        process.wait(max(0.0, deadline - time.monotonic()))
        finished = True
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        finished = False
    for stream in output:
        stream.close()
    return bytes(output[stdout]), bytes(output[stderr]), truncated, finished


class BwrapTty(TtySession):
    """A command inside the sandbox on a PTY that cocoond opens itself."""

    def __init__(
        self,
        driver: BwrapDriver,
        sandbox_id: str,
        command: list[str],
        env: dict[str, str],
        workdir: str,
        cols: int,
        rows: int,
    ) -> None:
        self.master, slave = pty.openpty()
        self._set_size(cols, rows, slave)
        try:
            self.process = driver._popen(
                sandbox_id,
                command,
                env,
                workdir,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,  # a process group of its own, to signal and end as one
            )
        except BaseException:
            os.close(self.master)
            raise
        finally:
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
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGHUP)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        os.close(self.master)
