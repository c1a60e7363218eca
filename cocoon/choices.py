from django.db import models


class TokenScope(models.TextChoices):
    ADMIN = "admin", "admin"
    AGENT = "agent", "agent"
