"""The Docker driver: hardened containers through the Docker Engine API (the `docker` SDK).

The package: engine.py (the SDK client, engine object names, the SDK's errors as DriverErrors),
networks.py (the shared and per-sandbox networks, and the egress proxy's service container), images.py
(images and the toolbox volume), streams.py (exec and terminals), driver.py (DockerDriver, which puts
them together: engine facts, a sandbox's lifecycle and its files).
"""

from sandboxes.drivers.docker.driver import DockerDriver

__all__ = ["DockerDriver"]
