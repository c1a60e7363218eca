"""The toolbox: Node.js and the agent CLIs, installed once into a volume mounted read-only at /opt/agents.

npm installs the configured packages into a staging folder on the host (kept, keyed by the package list,
so a re-install or a second instance reuses it); the driver then copies that folder into the volume
(docker, podman) or into COCOON_DATA/agents (bwrap). Updating needs no image rebuild.
"""

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import activity, config, events
from cocoon.choices import Visibility
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import TOOLBOX_MANIFEST as MANIFEST
from sandboxes.drivers.base import DriverError

NPM_TIMEOUT_S = 1800

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


def prepare(packages: list[str]) -> Path:
    """The staging folder for these packages, installed with npm unless it is there already."""
    target = staging_dir(packages)
    if (target / MANIFEST).exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise DriverError("npm is not installed on the server: run scripts/provision")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        subprocess.run(
            [
                npm,
                "install",
                "--global",
                "--prefix",
                str(work),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                *packages,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            umask=0o022,  # cocoond's own umask is 077, but the sandbox user must read the toolbox
        )
        manifest = {
            "packages": packages,
            "versions": _versions(work),
            "preparedAt": timezone.now().isoformat(),
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2))
        (work / MANIFEST).chmod(0o644)
        work.chmod(0o755)
        work.rename(target)
    except subprocess.CalledProcessError as error:
        raise DriverError(f"npm install failed: {error.stderr.strip()[-1000:]}") from error
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def install_toolbox() -> dict[str, Any]:
    """Install (or update) the toolbox from the settings' package list; returns its manifest."""
    packages = config.get_settings()["toolbox"]["packages"]

    def progress(status: str, **data: Any) -> None:
        events.publish("toolbox.install", {"status": status, "packages": packages, **data})

    progress("started")
    try:
        source = prepare(packages)
        progress("progress", step="copying")
        get_driver().install_toolbox(source)
    except Exception as error:
        progress("failed", error=str(error)[:2000])
        activity.record("toolbox.install_failed")
        raise
    manifest = json.loads((source / MANIFEST).read_text())
    progress("done", versions=manifest["versions"])
    activity.record("toolbox.installed", {"packages": ", ".join(packages)})
    return manifest


def toolbox_status() -> dict[str, Any]:
    manifest = get_driver().toolbox_manifest()
    wanted = config.get_settings()["toolbox"]["packages"]
    return {
        "installed": manifest is not None,
        "current": manifest is not None and manifest["packages"] == wanted,
        "packages": wanted,
        "versions": manifest["versions"] if manifest else {},
        "preparedAt": manifest["preparedAt"] if manifest else None,
    }
