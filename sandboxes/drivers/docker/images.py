"""What sandboxes are made from: images (looked up and built) and the toolbox volume."""

import io
import json
import secrets
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, NotFound
from docker.errors import ImageNotFound as DockerImageNotFound

from sandboxes.drivers.base import TOOLBOX, TOOLBOX_MANIFEST, DriverError, ImageInfo, ImageNotFound, labels
from sandboxes.drivers.docker.engine import DockerEngine, driver_error


class DockerImages(DockerEngine):
    def image_exists(self, image: str) -> bool:
        try:
            self._client.images.get(image)
        except DockerImageNotFound:
            return False
        except APIError as error:
            raise driver_error(error) from error
        return True

    def image_info(self, image: str) -> ImageInfo | None:
        try:
            found = self._client.images.get(image)
        except DockerImageNotFound:
            return None
        except Exception as error:
            raise driver_error(error) from error
        return ImageInfo(
            id=found.attrs["Id"], size_bytes=found.attrs["Size"], created_at=found.attrs["Created"]
        )

    def build_image(self, context: Path, tag: str, *, kind: str, target: str | None = None) -> Iterator[str]:
        try:
            for chunk in self._client.api.build(
                path=str(context),
                tag=tag,
                target=target,
                rm=True,
                forcerm=True,
                decode=True,
                labels={"io.cocoon.image": kind},
            ):
                if "error" in chunk:
                    raise DriverError(chunk["error"].strip())
                if line := chunk.get("stream", "").strip():
                    yield line
        except DriverError:
            raise
        except Exception as error:
            raise driver_error(error) from error

    # -- toolbox --------------------------------------------------------------------------------

    def _toolbox_helper(self, command: list[str]) -> Any:
        """A short-lived container with the toolbox volume mounted writable; the caller removes it."""
        from cocoon.config import get_settings

        self._ensure_shared_objects()
        return self._client.containers.create(
            image=get_settings()["sandbox"]["image"],
            command=command,
            user="root",
            network_mode="none",
            labels=labels("toolbox"),
            mounts=[docker.types.Mount(TOOLBOX, self._agents_volume(), type="volume")],
        )

    def install_toolbox(self, source: Path) -> None:
        """Copied in beside the current toolbox (.next-*), then switched in by renames: a copy that fails
        leaves the current one as it was, and sandboxes see the old or the new one, never an empty one."""
        new, old = f".next-{secrets.token_hex(4)}", f".old-{secrets.token_hex(4)}"
        switch = (
            f"set -e; cd {TOOLBOX}; test -f {new}/{TOOLBOX_MANIFEST}; mkdir {old}; "
            f"find . -mindepth 1 -maxdepth 1 ! -name {new} ! -name {old} -exec mv -t {old} {{}} +; "
            f"find {new} -mindepth 1 -maxdepth 1 -exec mv -t . {{}} +; "
            f"rm -rf {new} {old} .next-* .old-*"
        )
        try:
            helper = self._toolbox_helper(["sh", "-c", switch])
        except Exception as error:
            raise driver_error(error) from error
        try:
            # Into the created helper before it starts: the archive lands in the volume under {new}.
            with tempfile.TemporaryFile(dir=source.parent) as archive:
                with tarfile.open(fileobj=archive, mode="w") as tar:
                    tar.add(source, arcname=new)
                archive.seek(0)
                if not helper.put_archive(TOOLBOX, archive):
                    raise DriverError("could not copy the toolbox into its volume")
            helper.start()
            if helper.wait(timeout=300)["StatusCode"] != 0:
                raise DriverError("could not switch the toolbox volume to the new toolbox")
        except APIError as error:
            raise driver_error(error) from error
        finally:
            helper.remove(force=True)

    def toolbox_manifest(self) -> dict[str, Any] | None:
        try:
            helper = self._toolbox_helper(["true"])  # runs the sandbox image, which may not exist yet
        except DockerImageNotFound as error:
            raise ImageNotFound(str(error.explanation or error)) from error
        except APIError as error:  # a name no image can have (the settings' image is any string)
            if "invalid reference format" in str(error.explanation):
                raise ImageNotFound(str(error.explanation)) from error
            raise driver_error(error) from error
        try:
            stream, _stat = helper.get_archive(f"{TOOLBOX}/{TOOLBOX_MANIFEST}")
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                member = tar.extractfile(TOOLBOX_MANIFEST)
                return json.loads(member.read()) if member else None
        except NotFound:
            return None
        finally:
            helper.remove(force=True)
