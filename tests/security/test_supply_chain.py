"""No registry code runs on the host (issue #13, item 10): the toolbox's npm packages install with
--ignore-scripts as nobody in a bubblewrap jail, their install scripts run jailed without a network,
and what lands is checked (links stay inside, no setuid, cocoond's own) before it is used."""

import functools
import http.server
import io
import json
import os
import stat
import tarfile
import threading

import pytest

from sandboxes import toolbox
from sandboxes.drivers.base import DriverError


def tarball(name: str, postinstall: str, links: dict[str, str] | None = None) -> bytes:
    """An npm package: a setuid `bin` script, a postinstall, and symlink entries in the tarball."""
    package = {
        "name": name,
        "version": "1.0.0",
        "bin": {name: "cli.js"},
        "scripts": {"postinstall": postinstall},
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, data, mode in (
            ("package.json", json.dumps(package).encode(), 0o644),
            ("cli.js", b"#!/usr/bin/env node\nconsole.log('hello')\n", 0o4755),
        ):
            info = tarfile.TarInfo(f"package/{path}")
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        for path, target in (links or {}).items():
            info = tarfile.TarInfo(f"package/{path}")
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


@pytest.fixture
def registry(tmp_path, settings):
    """Tarballs served on loopback (no registry needed); the staging cache is the test's own."""
    settings.COCOON_TOOLBOX_CACHE = str(tmp_path / "cache")
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def publish(name: str, data: bytes) -> str:
        (served / f"{name}.tgz").write_bytes(data)
        return f"http://127.0.0.1:{server.server_address[1]}/{name}.tgz"

    yield publish
    server.shutdown()


def test_a_packages_install_script_never_runs_on_the_host(registry, tmp_path):
    marker = tmp_path / "marker"
    # The script tries the host, then does what Claude Code's does: writes into its own package.
    script = f"echo pwned > {marker}; chmod u+s cli.js; echo ran > ran-here"
    staged = toolbox.prepare([registry("cocoon-test-a", tarball("cocoon-test-a", script))])
    assert not marker.exists()
    package = staged / "lib/node_modules/cocoon-test-a"
    assert (package / "ran-here").read_text() == "ran\n"  # it ran, jailed: the install still works
    command = staged / "bin/cocoon-test-a"
    assert command.is_symlink()
    assert command.resolve() == package / "cli.js"
    assert json.loads((staged / toolbox.MANIFEST).read_text())["versions"] == {"cocoon-test-a": "1.0.0"}
    for folder, directories, files in os.walk(staged):
        for name in directories + files:
            info = os.lstat(os.path.join(folder, name))
            if not stat.S_ISLNK(info.st_mode):
                assert info.st_mode & 0o7022 == 0, (name, oct(info.st_mode))  # no setuid, not writable
            assert info.st_uid == os.geteuid(), name  # cocoond's, not nobody's


def test_a_link_out_of_the_toolbox_is_refused(registry, tmp_path):
    links = {"leak": "/etc/passwd", "up": "../../../../../../etc"}  # npm drops these tarball entries
    script = "ln -s /etc/shadow shadow"  # a script can still make one
    spec = registry("cocoon-test-b", tarball("cocoon-test-b", script, links))
    with pytest.raises(DriverError, match="link out of its folder: lib/node_modules/cocoon-test-b/shadow"):
        toolbox.prepare([spec])
    assert os.listdir(tmp_path / "cache") == []  # nothing staged, nothing left behind
