"""A git patch split into files and rows, for the unified and the side-by-side diff view."""

import re
from dataclasses import dataclass, field
from typing import Any

HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$")


@dataclass
class Row:
    """One line of the unified view: kind is context, add, del, hunk or meta."""

    kind: str
    text: str
    old: int | None = None
    new: int | None = None


@dataclass
class FileDiff:
    path: str
    rows: list[Row] = field(default_factory=list)

    @property
    def split_rows(self) -> list[tuple[Row | None, Row | None]]:
        """Pairs (left, right): removed lines face the added lines that replace them."""
        pairs: list[tuple[Row | None, Row | None]] = []
        removed: list[Row] = []
        added: list[Row] = []

        def flush() -> None:
            for index in range(max(len(removed), len(added))):
                pairs.append(
                    (
                        removed[index] if index < len(removed) else None,
                        added[index] if index < len(added) else None,
                    )
                )
            removed.clear()
            added.clear()

        for row in self.rows:
            if row.kind == "del":
                removed.append(row)
            elif row.kind == "add":
                added.append(row)
            else:
                flush()
                pairs.append((row, row))
        flush()
        return pairs


def _path_of(header: str) -> str:
    # "diff --git a/x b/x": the b/ side names the file as it is now.
    _prefix, _sep, rest = header.partition(" b/")
    return rest or header.removeprefix("diff --git ")


def parse_patch(patch: str) -> list[FileDiff]:
    files: list[FileDiff] = []
    old = new = 0
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            files.append(FileDiff(path=_path_of(line)))
            continue
        if not files:
            continue
        rows = files[-1].rows
        if match := HUNK.match(line):
            old, new = int(match[1]), int(match[2])
            rows.append(Row("hunk", line))
        elif not any(row.kind == "hunk" for row in rows):
            rows.append(Row("meta", line))  # index, mode, rename and binary lines before the first hunk
        elif line.startswith("+"):
            rows.append(Row("add", line[1:], new=new))
            new += 1
        elif line.startswith("-"):
            rows.append(Row("del", line[1:], old=old))
            old += 1
        elif line.startswith("\\"):
            rows.append(Row("meta", line))
        else:
            rows.append(Row("context", line[1:], old=old, new=new))
            old += 1
            new += 1
    return files


def diff_context(diff: dict[str, Any], view: str | None) -> dict[str, Any]:
    """What ui/_diff_files.html shows of a sandbox.diff result: the file list, each file's rows next to
    its summary, and the view asked for (?view=split, else unified)."""
    files_by_path = {entry["path"]: entry for entry in diff["files"]}
    return {
        "files": diff["files"],
        "diffs": [(files_by_path.get(file.path, {}), file) for file in parse_patch(diff["patch"])],
        "view": "split" if view == "split" else "unified",
    }
