"""The SandboxDriver interface: what cocoon needs of an engine, and the values that cross it."""

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from cocoon.errors import CocoonError, ErrorCode
from sandboxes.choices import SandboxState

AGENT_USER = "agent"
AGENT_UID = 1000  # the agent user's uid (and gid) inside every sandbox
AGENT_HOME = f"/home/{AGENT_USER}"
STATUS_DIR = "/opt/cocoon/status"  # where hooks and agent wrappers write, as the agent
WORKSPACE = "/workspace"
TOOLBOX = "/opt/agents"
# The sandbox image's /opt/cocoon (status script, hook files), also served to bwrap sandboxes.
OPT_COCOON = Path(settings.BASE_DIR) / "images" / "sandbox" / "opt-cocoon"
TOOLBOX_MANIFEST = ".cocoon-toolbox.json"
# Output of one exec is capped, so a runaway command cannot exhaust cocoond's memory.
MAX_EXEC_OUTPUT = 4 * 1024 * 1024
# The tmux server agents run in, inside every sandbox (`tmux -L cocoon`); under bwrap it is the keeper.
TMUX_SOCKET = "cocoon"


class DriverError(CocoonError):
    """The engine refused or failed; str() is its message, safe to show (no secrets in it)."""

    code = ErrorCode.DRIVER_ERROR

    def __init__(self, engine_message: str) -> None:
        super().__init__(details={"engine": engine_message})
        self.args = (engine_message,)

    def __str__(self) -> str:
        return self.args[0]


class ImageNotFound(DriverError):
    pass


class SandboxNotFound(DriverError):
    pass


@dataclass(frozen=True)
class Limits:
    cpus: float
    memory_mb: int
    pids: int


# An image with this label holds in /workspace the baseline repository of the branch it names, exactly
# as sandboxes.baseline.baseline makes it (the sandbox image bakes "main"): the engine copies
# it into a new workspace volume, so the create needs no archive put.
BASELINE_LABEL = "io.cocoon.baseline"


@dataclass(frozen=True)
class Baseline:
    """The empty repository a new workspace starts with: its branch and its tar."""

    branch: str
    archive: bytes


@dataclass(frozen=True)
class SandboxSpec:
    sandbox_id: str
    image: str
    network: str
    limits: Limits
    runtime: str = ""
    read_only_root: bool = False
    hostname: str = "sandbox"
    # What /workspace holds before the sandbox starts (None: a clone fills it after).
    workspace: Baseline | None = None
    # Set for egress sandboxes: the proxy variables, and the DNS server external lookups go to
    # (the proxy, which answers none, so no name lookup leaves the machine).
    env: dict[str, str] = field(default_factory=dict)
    dns: list[str] = field(default_factory=list)
    # A warm pool's member: the engine marks it so until a claim (release_member), so a member another
    # data directory left is known for one nobody worked in.
    pool_member: bool = False


@dataclass(frozen=True)
class FoundSandbox:
    """What the engine's objects say a sandbox was made as: enough for a row to adopt it."""

    image: str
    network: str
    limits: Limits
    runtime: str = ""


@dataclass
class EngineState:
    """What the engine says about one sandbox."""

    state: SandboxState
    ips: dict[str, str] = field(default_factory=dict)


@dataclass
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    truncated: bool = False

    def checked(self) -> "ExecResult":
        """This result, or a DriverError with the end of its stderr when the command failed."""
        if self.exit_code != 0:
            raise DriverError(self.stderr.decode(errors="replace").strip()[-500:] or f"exit {self.exit_code}")
        return self


@dataclass(frozen=True)
class ImageInfo:
    id: str
    size_bytes: int
    created_at: str  # as the engine wrote it (RFC 3339)


@dataclass(frozen=True)
class ServiceSpec:
    """One of cocoon's own service containers (the egress proxy). The engine runs it hardened (read-only
    root, no capabilities, no new privileges) as cocoond's user, on the "outbound" network and, under
    alias, on every sandbox's own network, and restarts it unless it was stopped."""

    name: str  # e.g. "egress-proxy": its kind label; its engine object name carries the instance prefix
    image: str
    memory_mb: int
    pids: int
    alias: str
    binds: dict[str, str] = field(default_factory=dict)  # path inside -> host path
    # A private tmpfs of the service's user at this path: its files on a node that shares no folder.
    scratch: str = ""
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServiceState:
    """What the engine says about one service container."""

    running: bool
    address: str | None  # on the "outbound" network
    addresses: dict[str, str] = field(default_factory=dict)  # network name -> its address there
    started_at: float | None = None  # epoch seconds, while running
    data: str = ""  # the data directory that made it (DATA_LABEL); "" if made before data ids


class TtySession(abc.ABC):
    """An interactive terminal into a sandbox: bytes both ways, resizable."""

    @abc.abstractmethod
    def read(self, size: int = 65536) -> bytes:
        """Block until output is available; b"" when the session has ended (or, on a descriptor set
        non-blocking, when there is nothing to read)."""

    @abc.abstractmethod
    def write(self, data: bytes) -> int:
        """Write what the terminal takes and return how much that was: all of data on a blocking
        descriptor; on a non-blocking one as much as it has room for, 0 when it is full."""

    @abc.abstractmethod
    def resize(self, cols: int, rows: int) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def fileno(self) -> int:
        """The descriptor a selector waits on: once it is readable, read() returns without blocking."""

    def take_buffered(self) -> bytes:
        """Output read off the descriptor already (so a selector would not see it), for the first read of
        a session a selector serves; b"" when there is none. Never blocks."""
        return b""


def object_name(*parts: str) -> str:
    """Engine object names carry the instance prefix, so instances sharing an engine never collide."""
    return "-".join((settings.COCOON_INSTANCE, *parts))


DATA_LABEL = "io.cocoon.data"  # the data directory that made an object (settings.COCOON_DATA_ID)


def labels(kind: str, sandbox_id: str | None = None) -> dict[str, str]:
    marked = {
        "io.cocoon.instance": settings.COCOON_INSTANCE,
        "io.cocoon.kind": kind,
        DATA_LABEL: settings.COCOON_DATA_ID,
    }
    if sandbox_id:
        marked["io.cocoon.sandbox"] = sandbox_id
    return marked


class SandboxDriver(abc.ABC):
    kind: str
    # How a sandbox names the server itself (a provider's localhost); bwrap shares the host's view.
    host_alias: str = "localhost"

    @abc.abstractmethod
    def capabilities(self) -> list[str]: ...

    def _lacks(self, what: str) -> DriverError:
        return DriverError(f"the {self.kind} driver has no {what}")

    def runtimes(self) -> list[str]:
        return []

    def keeps_sandboxes_across_engine_restarts(self) -> bool | None:
        """Whether sandboxes (and their agents) keep running while the engine's daemon restarts; None
        where no daemon holds them (bwrap, Podman)."""
        return None

    def remove_instance_objects(self) -> None:
        """Remove every object of this cocoon instance from the engine (a node forgotten): containers,
        networks and volumes, its service containers and the toolbox volume included."""
        raise self._lacks("objects of its own")

    def engine_id(self) -> str:
        """The engine's own id (the same engine reached two ways says the same), or "" if it has none."""
        return ""

    @abc.abstractmethod
    def image_exists(self, image: str) -> bool: ...

    # Images: only drivers with Capability.IMAGES have them; the defaults are for those without.

    def image_info(self, image: str) -> ImageInfo | None:
        """The image's facts, or None when the engine has no such image."""
        raise self._lacks("images")

    def build_image(self, context: Path, tag: str, *, kind: str, target: str | None = None) -> Iterator[str]:
        """Build context's Dockerfile (its stage target) as tag, labelled io.cocoon.image=kind; yields the
        build's output line by line and raises DriverError when the build fails."""
        raise self._lacks("images")

    # Networks: drivers with Capability.EGRESS_ENFORCED give each sandbox a network of its own, where the
    # egress proxy is its only neighbour; the defaults are for drivers without.

    @abc.abstractmethod
    def ensure_networks(self, *modes: str) -> None:
        """Create the networks of these modes, by default those sandboxes use (idempotent)."""

    def networks_exist(self, *modes: str) -> bool:
        """Whether the networks ensure_networks(*modes) creates are there; True where it creates none."""
        return True

    def sandbox_network(self, sandbox_id: str) -> str:
        """The name of the sandbox's own network (the key of its address in EngineState.ips)."""
        raise self._lacks("networks of sandboxes' own")

    def create_sandbox_network(self, sandbox_id: str, mode: str) -> str:
        """Create the sandbox's own network for a network mode (before create()); returns its name."""
        raise self._lacks("networks of sandboxes' own")

    # Service containers (the egress proxy), by ServiceSpec.name: only where egress is enforced.

    def find_service(self, name: str) -> ServiceState | None:
        """The service's state, or None when it does not exist."""
        raise self._lacks("service containers")

    def service_image_tags(self, name: str) -> list[str]:
        """The tags of the image the service runs (none when that image has lost its tags)."""
        raise self._lacks("service containers")

    def create_service(self, spec: ServiceSpec) -> ServiceState:
        """Create the service, not started; on failure nothing of it is left in the engine."""
        raise self._lacks("service containers")

    def start_service(self, name: str) -> ServiceState:
        raise self._lacks("service containers")

    def restart_service(self, name: str) -> None:
        raise self._lacks("service containers")

    def connect_service(self, name: str, network: str, alias: str) -> ServiceState:
        """Attach the service to a network (a sandbox's own) under alias."""
        raise self._lacks("service containers")

    def remove_service(self, name: str) -> None:
        """Remove the service, running or not; a missing one is fine."""
        raise self._lacks("service containers")

    def exec_service(
        self, name: str, command: list[str], *, stdin: bytes | None = None, timeout: float = 60
    ) -> ExecResult:
        """Run a command in the service as its own user (how cocoond trades files with a remote node's
        proxy: it shares no folder with the control plane)."""
        raise self._lacks("service containers")

    def run_host_helper(
        self, image: str, command: list[str], *, host_network: bool = True, timeout: float = 60
    ) -> ExecResult:
        """Run a one-shot container of image in the host's network namespace with NET_ADMIN and NET_RAW
        alone (host_network=False: on the engine's default bridge, with no capability), then remove it:
        how cocoon sets the node's netfilter rules (egress.fence) on any engine it reaches, local or
        remote, without a process of its own there."""
        raise self._lacks("service containers")

    # Agents' terminals

    def agent_terminal_command(self, agent_id: str, *, read_only: bool = False) -> list[str]:
        """The command open_tty runs to show an agent's tmux session (a viewer of its own)."""
        # Without $TMUX: under bwrap the viewer's own terminal is a pane of the same tmux server, and
        # tmux refuses to attach from inside itself unless told it is not nested.
        command = ["env", "-u", "TMUX", "tmux", "-L", TMUX_SOCKET, "attach-session", "-t", f"={agent_id}"]
        return [*command, "-r"] if read_only else command

    @abc.abstractmethod
    def create(self, spec: SandboxSpec) -> EngineState:
        """Create and start a sandbox. On failure nothing of it is left in the engine."""

    @abc.abstractmethod
    def start(self, sandbox_id: str) -> EngineState: ...

    @abc.abstractmethod
    def stop(self, sandbox_id: str) -> EngineState: ...

    @abc.abstractmethod
    def remove(self, sandbox_id: str) -> None:
        """Remove the sandbox and all it owns (volumes, folders); missing parts are fine."""

    @abc.abstractmethod
    def inspect(self, sandbox_id: str) -> EngineState: ...

    @abc.abstractmethod
    def list_ids(self) -> set[str]:
        """Ids of every sandbox of this instance the engine holds."""

    def owners(self) -> dict[str, str]:
        """list_ids() with the data directory each sandbox's objects carry ("" if made before data ids).
        A driver that keeps no labels holds only this data directory's sandboxes."""
        return dict.fromkeys(self.list_ids(), settings.COCOON_DATA_ID)

    def members(self) -> set[str]:
        """Ids of the sandboxes the engine marks as warm pool members nobody claimed (SandboxSpec.
        pool_member). A driver that keeps no marks has none: only this data directory's rows say so."""
        return set()

    def release_member(self, sandbox_id: str) -> None:
        """A claim took the member: its mark goes (it holds a user's work from now on). Nothing to do
        for a driver that keeps no marks."""
        return None

    def describe(self, sandbox_id: str) -> FoundSandbox:
        """What the sandbox's objects say it was made as (DriverError when they do not say)."""
        raise DriverError(f"the {self.kind} engine keeps no description of sandbox {sandbox_id}")

    @abc.abstractmethod
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
    ) -> ExecResult: ...

    @abc.abstractmethod
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
    ) -> TtySession: ...

    @abc.abstractmethod
    def install_toolbox(self, source: Path) -> None:
        """Replace the toolbox (mounted read-only at /opt/agents) with the contents of source."""

    @abc.abstractmethod
    def toolbox_manifest(self) -> dict[str, Any] | None:
        """The installed toolbox's manifest, or None when there is none."""

    @abc.abstractmethod
    def put_archive(self, sandbox_id: str, path: str, data: bytes) -> None:
        """Extract a tar archive into path inside the sandbox."""

    @abc.abstractmethod
    def get_archive(self, sandbox_id: str, path: str) -> Iterator[bytes]:
        """A tar stream of path inside the sandbox."""
