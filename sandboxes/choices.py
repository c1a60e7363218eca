from django.db import models

# The settings schema in the core names the network modes too; this app's name for them stays valid.
from cocoon.choices import NetworkMode

__all__ = ["Capability", "ImageVariant", "NetworkMode", "SandboxState"]


class SandboxState(models.TextChoices):
    CREATING = "creating", "creating"
    RUNNING = "running", "running"
    STOPPED = "stopped", "stopped"
    ERROR = "error", "error"
    MISSING = "missing", "missing"  # the container is gone from the engine


class Capability(models.TextChoices):
    IMAGES = "images", "images"
    RESOURCE_LIMITS = "resourceLimits", "resource limits"
    EGRESS_ENFORCED = "egressEnforced", "egress enforced"
    RUNTIMES = "runtimes", "runtimes"
    TTY = "tty", "tty"
    ARCHIVE = "archive", "archive"


class ImageVariant(models.TextChoices):
    BASE = "base", "base"
    DB = "db", "db"
    FULL = "full", "full"
