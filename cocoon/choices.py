from django.db import models


class TokenScope(models.TextChoices):
    ADMIN = "admin", "admin"
    AGENT = "agent", "agent"


class NetworkMode(models.TextChoices):
    """How a sandbox reaches the network; the core's settings schema names them, so they live here."""

    NONE = "none", "none"  # loopback only
    # Each sandbox with network has its own, shared only with the egress proxy.
    EGRESS = "egress", "egress"  # an internal network; the egress proxy is the way out
    OPEN = "open", "open"  # a bridge with free internet


class ProviderKind(models.TextChoices):
    """The API a model provider speaks: its environment variables and test request follow from it."""

    ANTHROPIC = "anthropic", "anthropic"
    OPENAI = "openai", "openai"
    HTTP = "http", "http"


class Visibility(models.TextChoices):
    """Who may read an event or an activity entry: admins only, or agent-scoped tokens too."""

    ADMIN = "admin", "admin"
    AGENT = "agent", "agent"
