"""sandboxes.diffs.parse_diff on what the real git writes for the diff script's one pass."""

import subprocess
from pathlib import Path

import pytest

from sandboxes import git
from sandboxes.diffs import Diff, FileChange, parse_diff

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t"]


def run(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *IDENTITY, *args], cwd=repo, check=True, capture_output=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    run(tmp_path, "init", "-q")
    (tmp_path / "kept.txt").write_text("one\ntwo\n")
    (tmp_path / "moved.txt").write_text("a long enough text to be found again\n" * 20)
    (tmp_path / "gone.txt").write_text("bye\n")
    (tmp_path / "run.sh").write_text("echo hi\n")
    run(tmp_path, "add", "-A")
    run(tmp_path, "commit", "-qm", "baseline")
    run(tmp_path, "tag", "cocoon-baseline")
    return tmp_path


def diff_script(repo: Path) -> bytes:
    return subprocess.run(["sh", "-c", git.DIFF, "diff"], cwd=repo, check=True, capture_output=True).stdout


def test_every_kind_of_change_is_read_with_its_line_counts(repo: Path) -> None:
    (repo / "kept.txt").write_text("one\nzwei\ndrei\n")
    (repo / "moved.txt").rename(repo / "tab\there.txt")
    (repo / "gone.txt").unlink()
    (repo / "run.sh").chmod(0o755)
    (repo / "blob.bin").write_bytes(bytes(range(256)))
    (repo / "new.txt").write_text("new\n")
    diff = parse_diff(diff_script(repo))
    assert sorted(diff.files, key=lambda change: change.path) == [
        FileChange("blob.bin", "added", None, None),
        FileChange("gone.txt", "deleted", 0, 1),
        FileChange("kept.txt", "modified", 2, 1),
        FileChange("new.txt", "added", 1, 0),
        FileChange("run.sh", "modified", 0, 0),
        FileChange("tab\there.txt", "renamed", 0, 0, old_path="moved.txt"),
    ]
    assert diff.patch.startswith("diff --git ")
    assert "GIT binary patch" in diff.patch
    run(repo, "stash", "-u", "-q")  # back to the baseline: the patch applies to it
    subprocess.run(["git", "apply", "-"], cwd=repo, input=diff.patch.encode(), check=True)
    assert (repo / "blob.bin").read_bytes() == bytes(range(256))


def test_nothing_changed_is_an_empty_diff_and_a_cut_output_an_error(repo: Path) -> None:
    assert parse_diff(diff_script(repo)) == parse_diff(b"") == Diff("", [])
    (repo / "kept.txt").write_text("changed\n")
    output = diff_script(repo)
    for cut in (output[:20], output[: output.index(b"diff --git") - 1]):
        with pytest.raises(ValueError, match=r"subsection not found|separator"):
            parse_diff(cut)
