from django.db import models

# The settings schema in the core names the network modes too; this app's name for them stays valid.
from cocoon.choices import NetworkMode

__all__ = ["Capability", "ImageVariant", "NetworkMode", "NodeState", "Placement", "SandboxState"]


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


# Runtimes cocoon offers when the engine lists them (gVisor, Kata + Firecracker, libkrun).
OPTIONAL_RUNTIMES = ("runsc", "kata-fc", "krun")


class NodeState(models.TextChoices):
    READY = "ready", "ready"  # new sandboxes may go there
    DRAINING = "draining", "draining"  # none may; those there stay until stopped
    UNREACHABLE = "unreachable", "unreachable"  # its last check got no answer


class Placement(models.TextChoices):
    """Which node a new sandbox goes to (settings sandbox.placement)."""

    SPREAD = "spread", "spread"  # the one with the most room left: work spreads over the nodes
    PACK = "pack", "pack"  # the one with the least that still fits: nodes fill one after another
