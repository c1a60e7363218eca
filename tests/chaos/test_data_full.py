"""Chaos (issue #14): the data directory fills up. Writes fail with a clear error (a stable code, no
traceback), nothing is half written, reads keep answering, and writes work again once there is room."""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
SIZE_MB = 64


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of SIZE_MB of our own, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_data_directory_refuses_writes_clearly_and_keeps_reading(start_cocoond, small_disk):
    cocoond = start_cocoond(data=small_disk / "data")
    cocoond.call("secrets.set", {"name": "BEFORE", "value": "kept"})
    filler = small_disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True, check=False)

    failed = [cocoond.post("secrets.set", {"name": f"DURING{n}", "value": "x" * 60_000}) for n in range(3)]
    for response in failed:
        assert response.status_code in {503, 507}, response.text
        error = response.json()["error"]
        assert error["code"] == "unavailable", error
        assert "Traceback" not in response.text
    # Reads answer, and what was there before is intact.
    names = {secret["name"] for secret in cocoond.call("secrets.list")}
    assert "BEFORE" in names
    assert not any(name.startswith("DURING") for name in names)
    assert cocoond.call("settings.get")

    filler.unlink()
    cocoond.call("secrets.set", {"name": "AFTER", "value": "fine"})
    names = {secret["name"] for secret in cocoond.call("secrets.list")}
    assert {"BEFORE", "AFTER"} <= names
    assert not any(name.startswith("DURING") for name in names)
