"""Value types the sandboxes' services return and their serializers render (sandboxes.schemas): the
wire shapes import these, never the modules that make them."""

from dataclasses import dataclass

from sandboxes.diffs import PatchConflict


@dataclass(frozen=True)
class FileEntry:
    name: str  # relative to the folder listed
    kind: str  # file, directory, symlink or other
    size: int
    mode: str  # octal permission bits
    mtime: float


@dataclass(frozen=True)
class FileContent:
    content: str
    encoding: str  # utf-8, or base64 for binary content


@dataclass(frozen=True)
class PatchResult:
    applied: bool
    valid: bool  # whether it applies (cleanly, or with --3way's conflict markers)
    conflicts: list[PatchConflict]


@dataclass(frozen=True)
class StatusEntry:
    """A changed file: its index and worktree status letters, as git status --porcelain gives them."""

    path: str
    index: str
    worktree: str
    old_path: str | None = None  # of a rename or copy


@dataclass(frozen=True)
class GitStatus:
    branch: str
    ahead: int
    behind: int
    files: list[StatusEntry]


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str


@dataclass(frozen=True)
class ToolboxStatus:
    installed: bool
    current: bool  # installed for the settings' package list
    packages: list[str]  # the settings' package list
    versions: dict[str, str]
    prepared_at: str | None


@dataclass(frozen=True)
class ForeignSandbox:
    """A sandbox another data directory left on an engine under this instance's name."""

    sandbox_id: str
    node: str
    data: str  # that data directory's id (io.cocoon.data)
