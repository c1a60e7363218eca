from django.db import models


class SandboxState(models.TextChoices):
    CREATING = "creating", "creating"
    RUNNING = "running", "running"
    STOPPED = "stopped", "stopped"
    ERROR = "error", "error"
    MISSING = "missing", "missing"  # the container is gone from the engine


class NetworkMode(models.TextChoices):
    NONE = "none", "none"  # loopback only
    # Each sandbox with network has its own, shared only with the egress proxy.
    EGRESS = "egress", "egress"  # an internal network; the egress proxy is the way out
    OPEN = "open", "open"  # a bridge with free internet


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
