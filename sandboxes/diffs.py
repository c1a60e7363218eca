"""What git says about patches, parsed: the diff script's three parts, and git apply's complaints.

Pure functions over bytes and text; running git is sandboxes.git's job.
"""

import re
from dataclasses import dataclass

# Between the diff script's parts: --numstat, --name-status and the patch itself.
SPLIT = b"\0\0cocoon-split\0\0"
CONFLICT_LINES = (
    re.compile(r"^error: patch failed: (?P<path>.+):(?P<line>\d+)$"),
    re.compile(r"^error: (?P<path>.+?): (?P<message>.+)$"),
    re.compile(r"^U (?P<path>.+)$"),  # --3way left conflict markers
)
# What git apply says of input that is no patch at all.
UNREADABLE = ("No valid patches in input", "corrupt patch", "unrecognized input")


@dataclass(frozen=True)
class FileChange:
    """One file of a diff: its status and lines added/deleted (None for binary files)."""

    path: str
    status: str
    added: int | None
    deleted: int | None
    old_path: str | None = None  # of a rename or copy


@dataclass(frozen=True)
class Diff:
    patch: str
    files: list[FileChange]


@dataclass(frozen=True)
class PatchConflict:
    """Why git apply refused one file."""

    path: str
    message: str


def status_name(code: str) -> str:
    return {
        "A": "added",
        "M": "modified",
        "D": "deleted",
        "R": "renamed",
        "C": "copied",
        "T": "typechange",
    }.get(code[:1], "modified")


def _line_counts(numstat: bytes) -> dict[str, tuple[int | None, int | None]]:
    """Lines added and deleted per path (None for binary files), from `git diff --numstat -z`."""
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
    return counts


def parse_diff(output: bytes) -> Diff:
    """The diff script's output: the patch, and each file with its status and line counts."""
    numstat, name_status, patch = output.split(SPLIT, 2)
    counts = _line_counts(numstat)
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
        files.append(FileChange(path, status_name(status), added, deleted, old))
    return Diff(patch.decode("utf-8", errors="surrogateescape"), files)


def unreadable(errors: str) -> bool:
    """Whether git apply refused its input as no patch at all."""
    return any(complaint in errors for complaint in UNREADABLE)


def conflicts(errors: str) -> list[PatchConflict]:
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
    return [PatchConflict(path, "; ".join(messages)) for path, messages in found.items()]


def left_conflict_markers(errors: str) -> bool:
    """Whether git apply --3way applied the patch with conflict markers (its "U <path>" lines)."""
    return any(line.startswith("U ") for line in errors.splitlines())
