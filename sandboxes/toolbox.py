"""The toolbox: Node.js and the agent CLIs, installed once into a volume mounted read-only at /opt/agents.

npm installs the configured packages into a staging folder on the host (kept, keyed by the package list,
so a re-install or a second instance reuses it); the driver then copies that folder into the volume
(docker, podman) or into COCOON_DATA/agents (bwrap). Updating needs no image rebuild.

Registry code never runs on the host as cocoond: npm installs with --ignore-scripts inside a bubblewrap
jail as nobody, seeing the host read-only and only the staging folder writable; the packages' install
scripts (Claude Code's places its native binary) then run by `npm rebuild` in the same jail without a
network. What lands is checked before cocoond takes it over (_take_over).
"""

import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import activity, config, events, locks
from cocoon.choices import Visibility
from cocoon.errors import Conflict
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import TOOLBOX, DriverError, ImageNotFound
from sandboxes.drivers.base import TOOLBOX_MANIFEST as MANIFEST
from sandboxes.models import LOCAL_NODE
from sandboxes.nodes import each_node, node_driver, reachable_nodes, ship_image
from sandboxes.types import ToolboxStatus

logger = logging.getLogger(__name__)
LOCK = "toolbox-install"  # cocoon.locks: one install at a time per instance
NPM_TIMEOUT_S = 1800
NOBODY = 65534  # npm and the packages' scripts run as nobody when cocoond is root
NPM_CACHE = ".npm-cache"  # inside the staging folder (the jail's only writable place); removed after
# The host's environment that npm may need in the jail: a proxy, its CA, a mirror (npm_config_*...).
PASSED_ENV = (
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
)  # fmt: skip

activity.register_messages(
    {
        "toolbox.installed": _("The toolbox was installed (%(packages)s)."),
        "toolbox.install_failed": _("Installing the toolbox failed."),
    }
)
events.register_types("toolbox.install", visibility=Visibility.ADMIN)


def staging_dir(packages: list[str]) -> Path:
    key = hashlib.sha256(json.dumps(sorted(packages)).encode()).hexdigest()[:16]
    return Path(settings.COCOON_TOOLBOX_CACHE) / key


def _versions(prefix: Path) -> dict[str, str]:
    versions = {}
    for package_json in sorted((prefix / "lib" / "node_modules").glob("*/package.json")) + sorted(
        (prefix / "lib" / "node_modules").glob("@*/*/package.json")
    ):
        meta = json.loads(package_json.read_text())
        versions[meta["name"]] = meta["version"]
    return versions


def _jail(work: Path, command: list[str], network: bool) -> list[str]:
    """command in a bubblewrap jail: the host's /usr and /etc read-only, the staging folder writable at
    /opt/agents, no network unless asked. As root, bwrap mounts and the jail's first act is dropping to
    nobody (with no way back: no_new_privs, no capabilities); otherwise bwrap runs as cocoond's user."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise DriverError("bubblewrap is not installed on the server: run scripts/provision")
    root = os.geteuid() == 0
    env = {name: value for name, value in os.environ.items() if name.startswith("npm_config_")}
    env |= {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env |= {"PATH": f"{TOOLBOX}/bin:/usr/bin:/bin", "HOME": "/tmp"}
    env["npm_config_cache"] = f"{TOOLBOX}/{NPM_CACHE}"
    drop = [
        "setpriv",
        f"--reuid={NOBODY}",
        f"--regid={NOBODY}",
        "--clear-groups",
        "--no-new-privs",
        "--bounding-set=-all",
        "--inh-caps=-all",
    ]
    return [
        bwrap,
        *(["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if root else ["--unshare-user"]),
        "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
        *([] if network else ["--unshare-net"]),
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        *[arg for name, value in env.items() for arg in ("--setenv", name, value)],
        "--ro-bind", "/usr", "/usr",
        "--ro-bind", "/etc", "/etc",
        *[arg for top in ("bin", "sbin", "lib", "lib64") for arg in ("--ro-bind-try", f"/{top}", f"/{top}")],
        "--perms", "0755", "--dir", os.path.dirname(TOOLBOX),
        "--bind", str(work), TOOLBOX,
        "--perms", "1777", "--tmpfs", "/tmp",
        # cocoond's own npm configuration (registry, CA, a token) for npm's download only: the packages'
        # scripts, which run without a network, never see it.
        *(["--ro-bind-try", str(Path.home() / ".npmrc"), "/tmp/.npmrc"] if network else []),
        "--proc", "/proc",
        "--dev", "/dev",
        "--chdir", TOOLBOX,
        *(drop if root else []),
        *command,
    ]  # fmt: skip


def _run_jailed(work: Path, command: list[str], network: bool) -> None:
    try:
        subprocess.run(
            _jail(work, command, network),
            check=True,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            umask=0o022,  # cocoond's own umask is 077, but the sandbox user must read the toolbox
        )
    except subprocess.CalledProcessError as error:
        raise DriverError(f"{command[0]} {command[1]} failed: {error.stderr.strip()[-1000:]}") from error


def _take_over(root: Path) -> None:
    """Make the installed tree cocoond's, once nothing of the install runs any more. Only directories,
    regular files and relative links that stay inside the tree are accepted; modes are normalised (no
    setuid, nothing writable but by the owner); every bin entry leads to a regular file."""
    inside = os.path.realpath(root)
    for folder, directories, files in os.walk(root):  # never follows links
        for name in directories + files:
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            shown = os.path.relpath(path, root)
            if stat.S_ISLNK(mode):
                target = os.readlink(path)
                if os.path.isabs(target) or os.path.commonpath([inside, os.path.realpath(path)]) != inside:
                    raise DriverError(f"the toolbox holds a link out of its folder: {shown} -> {target}")
            elif not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise DriverError(f"the toolbox holds a special file: {shown}")
            if os.geteuid() == 0:
                os.lchown(path, 0, 0)
            if not stat.S_ISLNK(mode):
                os.chmod(path, 0o755 if stat.S_ISDIR(mode) or mode & 0o111 else 0o644)
    for entry in (root / "bin").iterdir() if (root / "bin").is_dir() else ():
        if not entry.resolve().is_file():
            raise DriverError(f"the toolbox's command {entry.name} leads to no file")
    if os.geteuid() == 0:
        os.chown(root, 0, 0)
    root.chmod(0o755)


def prepare(packages: list[str]) -> Path:
    """The staging folder for these packages, installed with npm unless it is there already."""
    target = staging_dir(packages)
    if (target / MANIFEST).exists():
        return target
    if shutil.which("npm") is None:
        raise DriverError("npm is not installed on the server: run scripts/provision")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        if os.geteuid() == 0:
            os.chown(work, NOBODY, NOBODY)
        flags = ["--global", "--prefix", TOOLBOX, "--no-audit", "--no-fund", "--loglevel=error"]
        _run_jailed(work, ["npm", "install", "--ignore-scripts", *flags, *packages], network=True)
        _run_jailed(work, ["npm", "rebuild", *flags], network=False)
        shutil.rmtree(work / NPM_CACHE, ignore_errors=True)
        _take_over(work)
        manifest = {
            "packages": packages,
            "versions": _versions(work),
            "preparedAt": timezone.now().isoformat(),
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2))
        (work / MANIFEST).chmod(0o644)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def install_running() -> bool:
    """Whether an install holds the toolbox lock now (in any process of this instance)."""
    return locks.busy(LOCK)


def install_toolbox() -> dict[str, Any] | None:
    """Install (or update) the toolbox from the settings' package list; returns its manifest. One at a
    time: while another install runs, this one does nothing (None) and that one's events tell."""
    with locks.exclusive(LOCK, wait=False) as held:
        if not held:
            logger.info("a toolbox install is running already: this one does nothing")
            return None
        return _install()


def _install() -> dict[str, Any]:
    packages = config.get_settings()["toolbox"]["packages"]

    def progress(status: str, **data: Any) -> None:
        events.publish("toolbox.install", {"status": status, "packages": packages, **data})

    progress("started")
    try:
        source = prepare(packages)
        progress("progress", step="copying")
        get_driver().install_toolbox(source)
        progress("progress", step="nodes")
        failed = install_on_nodes(source)
    except Exception as error:
        progress("failed", error=str(error)[:2000])
        activity.record("toolbox.install_failed")
        raise
    manifest = json.loads((source / MANIFEST).read_text())
    # A node that could not take it keeps its old toolbox (or none) until the next install.
    progress("done", versions=manifest["versions"], failedNodes=failed)
    activity.record("toolbox.installed", {"packages": ", ".join(packages)})
    return manifest


def install_on_nodes(source: Path, nodes: list[str] | None = None) -> dict[str, str]:
    """Copy a prepared toolbox into the volume of the reachable remote nodes (or of these); returns
    why it failed, by node. The copy runs in the sandbox image, which a node gets first if it lacks it."""
    image = config.get_settings()["sandbox"]["image"]

    def install(node: str) -> str:
        try:
            ship_image(node, image)
            node_driver(node).install_toolbox(source)
        except Exception as error:  # one node's trouble must not keep the others without
            logger.exception("could not install the toolbox on node %s", node)
            return str(error)[:500]
        return ""

    targets = [node for node in nodes or reachable_nodes() if node != LOCAL_NODE]
    return {node: error for node, error in zip(targets, each_node(install, targets), strict=True) if error}


def prepare_node(node: str) -> None:
    """A node taken in gets the toolbox the local node has, if its prepared folder is still here."""
    try:
        manifest = get_driver().toolbox_manifest()
    except ImageNotFound:  # no sandbox image here yet: no toolbox either
        return
    if manifest is None:
        return
    source = staging_dir(manifest["packages"])
    if (source / MANIFEST).exists() and (failed := install_on_nodes(source, [node])):
        raise DriverError(failed[node])


def toolbox_status() -> ToolboxStatus:
    document = config.get_settings()
    try:
        manifest = get_driver().toolbox_manifest()
    except ImageNotFound:
        raise Conflict(
            _("The sandbox image %(image)s does not exist yet: build it with image.build."),
            image=document["sandbox"]["image"],
        ) from None
    wanted = document["toolbox"]["packages"]
    return ToolboxStatus(
        installed=manifest is not None,
        current=manifest is not None and manifest["packages"] == wanted,
        packages=wanted,
        versions=manifest["versions"] if manifest else {},
        prepared_at=manifest["preparedAt"] if manifest else None,
    )
