"""Engines on other hosts (sandboxes.nodes): reached over their remote API with mutual TLS."""

import tempfile
from pathlib import Path
from typing import Any

import docker
from django.conf import settings
from docker.errors import ImageNotFound as DockerImageNotFound

from cocoon.datadir import ensure_private_dir, write_private_file
from sandboxes.choices import OPTIONAL_RUNTIMES
from sandboxes.drivers.docker.engine import engine_client


def tls_config(folder: Path, ca: str, cert: str, key: str) -> docker.tls.TLSConfig:
    """The TLS material as files (the SDK reads paths) in a private folder: the engine's CA pinned,
    cocoon's certificate and key."""
    ensure_private_dir(folder)
    for name, content in (("ca.pem", ca), ("cert.pem", cert), ("key.pem", key)):
        write_private_file(folder / name, content)
    return docker.tls.TLSConfig(
        client_cert=(str(folder / "cert.pem"), str(folder / "key.pem")),
        ca_cert=str(folder / "ca.pem"),
        verify=True,
    )


def probe(url: str, tls: docker.tls.TLSConfig | None, timeout: int) -> dict[str, Any]:
    """What the engine says of itself (raises when it does not answer, or not over this TLS)."""
    client = engine_client(url, tls, timeout)
    try:
        info, version = client.info(), client.version()
    finally:
        client.close()
    return {
        "engineId": str(info.get("ID", "")),
        "version": str(version.get("Version", "")),
        "apiVersion": str(version.get("ApiVersion", "")),
        "os": str(info.get("OperatingSystem", "")),
        "arch": str(info.get("Architecture", "")),
        "runtimes": sorted(set(info.get("Runtimes") or {}) & set(OPTIONAL_RUNTIMES)),  # as the local
        "liveRestore": bool(info.get("LiveRestoreEnabled")),
        "cpus": int(info.get("NCPU") or 1),
        "memoryMb": int(info.get("MemTotal") or 0) // 2**20,
    }


def ship_image(image: str, url: str, tls: docker.tls.TLSConfig | None) -> bool:
    """The local engine's copy of an image into the engine at url (docker save streamed into docker
    load); False when the local engine has none by that name."""
    local = engine_client(None, None, 600)
    try:
        found = local.images.get(image)
    except DockerImageNotFound:
        return False
    remote = engine_client(url, tls, 600)
    try:
        # On disk in the data folder (/tmp may be memory): an image may be gigabytes.
        with tempfile.TemporaryFile(dir=settings.DATA_DIR) as spool:
            # Under the name asked for (an image's first tag may be another); by id, as it is.
            named = next((tag for tag in found.tags if tag in {image, f"{image}:latest"}), False)
            for chunk in found.save(named=named):
                spool.write(chunk)
            spool.seek(0)
            remote.images.load(spool)
    finally:
        remote.close()
        local.close()
    return True
