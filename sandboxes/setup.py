"""Sandbox parts of first-run setup and of the setup checklist (network, image)."""

import logging
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from cocoon import config
from cocoon.errors import interpolate_lazy
from cocoon.setup import register_check
from sandboxes.choices import Capability
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError
from sandboxes.images import image_tag
from sandboxes.reconcile import foreign_sandboxes

logger = logging.getLogger(__name__)


@register_check("network", _("Sandbox networks"))
def _network() -> tuple[bool, Any]:
    try:
        driver = get_driver()
        if Capability.EGRESS_ENFORCED not in driver.capabilities():
            return True, _("Not needed by this driver.")
        present = driver.networks_exist()  # sandboxes' own networks are made with them
    except DriverError as error:
        return False, str(error)
    if present:
        return True, _("The networks exist.")
    return False, _("The networks are missing; they are created on start.")


@register_check("liveRestore", _("Sandboxes survive an engine restart"))
def _live_restore() -> tuple[bool, Any]:
    try:
        kept = get_driver().keeps_sandboxes_across_engine_restarts()
    except DriverError as error:
        return False, str(error)
    if kept is None:
        return True, _("Not needed by this driver: no daemon holds its sandboxes.")
    if kept:
        return True, _("On: sandboxes and their agents keep running while dockerd restarts.")
    return False, _(
        'Off: a dockerd restart stops every sandbox and its agents. Add "live-restore": true to '
        "/etc/docker/daemon.json and reload dockerd (SIGHUP); scripts/provision does this for the dockerd "
        "it manages."
    )


def _builds_the_image() -> bool:
    """Whether image.build makes the configured image: only cocoon's own tag; another is the operator's."""
    return bool(config.get_settings()["sandbox"]["image"] == image_tag("base"))


@register_check("image", _("Sandbox image"), fix="image.build", fixable=_builds_the_image)
def _image() -> tuple[bool, Any]:
    image = config.get_settings()["sandbox"]["image"]
    try:
        if get_driver().image_exists(image):
            return True, image
    except DriverError as error:
        return False, str(error)
    if _builds_the_image():
        return False, _("The image is missing: build it with image.build.")
    return False, interpolate_lazy(
        _(
            "The image %(image)s (settings: sandbox.image) is not on the engine, and cocoon builds only "
            "%(own)s: load it into the engine, or set sandbox.image back to %(own)s."
        ),
        {"image": image, "own": image_tag("base")},
    )


@register_check("toolbox", _("Agent toolbox"), fix="toolbox.install")
def _toolbox() -> tuple[bool, Any]:
    from sandboxes.toolbox import toolbox_status

    try:
        status = toolbox_status()
    except Exception as error:  # no image yet, engine down: say so instead of failing the list
        return False, str(error)
    if not status.installed:
        return False, _("Not installed: run toolbox.install.")
    if not status.current:
        return False, _("Installed for another package list: run toolbox.install.")
    return True, ", ".join(f"{name} {version}" for name, version in status.versions.items())


def engine_info() -> dict[str, Any]:
    """system.info's part about the engine."""
    kind, capabilities, runtimes = None, [], []
    try:
        driver = get_driver()
        kind = driver.kind  # the driver in use (detecting again cost a stat of each engine socket per call)
        capabilities, runtimes = driver.capabilities(), driver.runtimes()
    except DriverError:
        pass
    return {"driverKind": kind, "capabilities": capabilities, "runtimes": runtimes}


def ensure_on_start() -> None:
    """At cocoond start: create the networks, align sandboxes with the engine and their network with the
    rows (sandboxes.networking: the egress policy), and (unless COCOON_AUTO_INSTALL is off) build a
    missing image, install a missing toolbox and bring the network up (the egress proxy) in the
    background."""
    from celery import chain

    from sandboxes import networking
    from sandboxes.reconcile import CREATE_GRACE_S, reconcile
    from sandboxes.tasks import build_image, install_toolbox
    from sandboxes.toolbox import toolbox_status

    try:
        driver = get_driver()
        driver.ensure_networks()
        # The embedded worker made every create in progress; none of them outlived the last cocoond.
        reconcile(0 if settings.CELERY_EMBEDDED else CREATE_GRACE_S)
        network_work = networking.on_start(install=settings.COCOON_AUTO_INSTALL)
        if not settings.COCOON_AUTO_INSTALL:
            return
        image = config.get_settings()["sandbox"]["image"]
        work = []
        if Capability.IMAGES in driver.capabilities() and not driver.image_exists(image):
            if image != image_tag("base"):
                return  # a custom image is the operator's to provide
            work.append(build_image.si("base"))
        if work or not toolbox_status().installed:
            work.append(install_toolbox.si())
        work += network_work
        if work:
            chain(*work).delay()
    except Exception:
        # The engine may be down; cocoond serves anyway and the checklist shows what is missing.
        logger.exception("sandbox setup at start-up failed")


@register_check("leftovers", _("Sandboxes of another data directory"))
def _leftovers() -> tuple[bool, Any]:
    """Informational: what another data directory left is never removed without an admin's say, and
    keeps nothing of this one from working (ok either way)."""
    left = foreign_sandboxes()
    if not left:
        return True, _("None: every sandbox on the engines is this data directory's.")
    return True, interpolate_lazy(
        _(
            "Kept, left by another data directory: %(list)s. Make each this one's with "
            "`cocoon engine adopt <id>`, or remove it with `cocoon engine remove <id>`."
        ),
        {"list": ", ".join(f"{each.sandbox_id} (node {each.node}, data {each.data})" for each in left)},
    )
