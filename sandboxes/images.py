"""Sandbox images: status and builds from images/sandbox, progress streamed as image.build events."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from cocoon import activity, events, locks
from cocoon.choices import Visibility
from cocoon.errors import Conflict
from sandboxes.choices import Capability, ImageVariant
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError, ImageInfo, SandboxDriver

CONTEXT = Path(settings.BASE_DIR) / "images" / "sandbox"
REPOSITORY = "cocoon-sandbox"
TAGS = {ImageVariant.BASE: "latest", ImageVariant.DB: "db", ImageVariant.FULL: "full"}

activity.register_messages(
    {
        "image.built": _("Image %(tag)s was built."),
        "image.build_failed": _("Building image %(tag)s failed."),
    }
)
events.register_types("image.build", visibility=Visibility.ADMIN)


@dataclass(frozen=True)
class ImageStatus:
    variant: str
    tag: str
    image: ImageInfo | None  # None until it is built


def image_tag(variant: str) -> str:
    return f"{REPOSITORY}:{TAGS[ImageVariant(variant)]}"


def _image_driver() -> SandboxDriver:
    driver = get_driver()
    if Capability.IMAGES not in driver.capabilities():
        raise Conflict(_("The %(driver)s driver has no images."), driver=driver.kind)
    return driver


def image_status() -> list[ImageStatus]:
    driver = _image_driver()
    status = []
    for variant in ImageVariant:
        tag = image_tag(variant)
        try:
            image = driver.image_info(tag)
        except DriverError:
            image = None
        status.append(ImageStatus(variant.value, tag, image))
    return status


def build_lock(variant: str) -> str:
    return f"image-build-{ImageVariant(variant)}"  # cocoon.locks: one build of a tag at a time


def build_running(variant: str) -> bool:
    return locks.busy(build_lock(variant))


def build_image(variant: str) -> str | None:
    """Build one variant (None, doing nothing, while a build of it runs already: its events tell);
    every line of build output goes out as an image.build event. The engine moves the tag only once
    the build succeeded: a failed one leaves the image that was there."""
    with locks.exclusive(build_lock(variant), wait=False) as held:
        return _build(variant) if held else None


def _build(variant: str) -> str:
    driver = _image_driver()
    tag = image_tag(variant)

    def progress(status: str, **data: Any) -> None:
        events.publish("image.build", {"variant": variant, "tag": tag, "status": status, **data})

    progress("started")
    try:
        for line in driver.build_image(CONTEXT, tag, kind="sandbox", target=variant):
            progress("progress", line=line)
    except Exception as error:
        progress("failed", error=str(error)[:2000])
        activity.record("image.build_failed", {"tag": tag})
        raise
    progress("done")
    activity.record("image.built", {"tag": tag})
    return tag
