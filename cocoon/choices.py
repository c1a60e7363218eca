from django.db import models


class TokenScope(models.TextChoices):
    ADMIN = "admin", "admin"
    AGENT = "agent", "agent"


class Visibility(models.TextChoices):
    """Who may read an event or an activity entry: admins only, or agent-scoped tokens too."""

    ADMIN = "admin", "admin"
    AGENT = "agent", "agent"
