"""What git says about patches, parsed: the diff script's output, and git apply's complaints.

Pure functions over bytes and text; running git is sandboxes.git's job.
"""

import re
from dataclasses import dataclass

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


class _Fields:
    """NUL-terminated fields of `git diff -z` output, read one at a time; what follows stays bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def next(self) -> bytes:
        end = self.data.index(b"\0", self.position)  # ValueError: output git does not write
        field, self.position = self.data[self.position : end], end + 1
        return field

    def rest(self) -> bytes:
        return self.data[self.position :]


def _count(text: bytes) -> int | None:
    return None if text == b"-" else int(text)  # "-": a binary file


def parse_diff(output: bytes) -> Diff:
    """One `git diff --raw --numstat --patch -z` (sandboxes.git.DIFF): a raw record per file (its
    status and path, two paths for a rename or copy), then per file in the same order its lines added
    and deleted, then a NUL and the patch. Empty when nothing changed."""
    fields = _Fields(output)
    changes: list[tuple[str, str, str | None]] = []  # status, path, old path
    while fields.rest().startswith(b":"):
        status = fields.next().rsplit(b" ", 1)[-1].decode()
        old = fields.next().decode() if status[:1] in {"R", "C"} else None
        changes.append((status, fields.next().decode(), old))
    counts: dict[str, tuple[int | None, int | None]] = {}
    for _change in changes:
        added, deleted, path = fields.next().split(b"\t", 2)
        if not path:  # a rename or copy: its two paths follow
            fields.next()
            path = fields.next()
        counts[path.decode()] = (_count(added), _count(deleted))
    if changes and fields.next():
        raise ValueError("no separator before the patch")
    files = [
        FileChange(path, status_name(status), *counts.get(path, (None, None)), old_path=old)
        for status, path, old in changes
    ]
    return Diff(fields.rest().decode("utf-8", errors="surrogateescape"), files)


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
