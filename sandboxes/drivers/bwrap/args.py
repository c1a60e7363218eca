"""Command lines of a bwrap sandbox: bwrap's own options (what the sandbox is made of), entering its
namespaces as the agent user (nsenter, setpriv), and dropping root to the sandbox's host user."""

import os
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings

from sandboxes.choices import NetworkMode
from sandboxes.drivers.base import AGENT_UID, AGENT_USER, TOOLBOX, WORKSPACE, DriverError

PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "agent:x:1000:1000:agent:/home/agent:/bin/bash\n"
    "nobody:x:65534:65534::/:/usr/sbin/nologin\n"
)
GROUP = "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n"
SUBDIRS = ("workspace", "home", "status")
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
# Top-level host folders a sandbox gets its own (empty or private) version of instead.
PRIVATE_TOP_LEVEL = {"proc", "dev", "tmp", "run", "home", "root", "opt", "workspace", "lost+found"}


def bwrap_args(
    folder: Path, base: Path, toolbox: Path, spec: dict[str, Any], fds: dict[str, int]
) -> list[str]:
    """bwrap's options for the sandbox in folder (under base), bind sources given as open fds."""
    args = [
        "--clearenv",  # nothing of cocoond's environment (tokens, URLs) reaches the sandbox
        "--unshare-user", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID),
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--hostname", spec["hostname"],
        "--new-session", "--cap-drop", "ALL",
        *host_read_only(),
        "--dev", "/dev", "--proc", "/proc",
        "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/root",
        "--perms", "0700", "--dir", "/run/cocoon",  # tmux's sockets: the sandbox's own
        # Hide cocoon's data and every other sandbox; the binds below come from the host paths.
        "--tmpfs", "/home", "--tmpfs", str(settings.DATA_DIR), "--tmpfs", str(base),
        "--bind", str(folder / "workspace"), WORKSPACE,
        "--bind", str(folder / "home"), f"/home/{AGENT_USER}",
        "--dir", "/opt/cocoon",
        "--ro-bind", str(base / "opt-cocoon" / "bin"), "/opt/cocoon/bin",
        "--ro-bind", str(base / "opt-cocoon" / "hooks"), "/opt/cocoon/hooks",
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
    if toolbox.is_dir():
        args += ["--ro-bind", str(toolbox), TOOLBOX]
    return args


def host_read_only() -> list[str]:
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


def enter(pid: int, command: list[str], workdir: str) -> list[str]:
    """A command line that runs `command` inside the namespaces of the keeper with host PID pid, as the
    sandbox's agent user, with no capabilities and no way to gain any: only then does it touch
    anything of the sandbox's."""
    return [
        binary("nsenter"), f"--target={pid}",
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


def as_sandbox_user(command: list[str], uid: int, gid: int) -> list[str]:
    """command, run as the host user uid:gid with no groups and no capabilities when cocoond is root."""
    if os.getuid() != 0:
        return command
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--",
        *command,
    ]


def binary(name: str) -> str:
    binary = shutil.which(name)
    if binary is None:
        raise DriverError(f"{name} is not installed: run scripts/provision")
    return binary
