from django.db import models


class ProviderGrant(models.Model):
    """A sandbox may use a provider's credential-proxy route once an agent with that provider was
    started in it."""

    sandbox = models.ForeignKey("sandboxes.Sandbox", on_delete=models.CASCADE, related_name="grants")
    provider = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["sandbox", "provider"], name="one_grant_per_provider")]

    def __str__(self) -> str:
        return f"{self.provider} for {self.sandbox_id}"


class DeniedAttempt(models.Model):
    """Attempts the egress proxy refused, folded per sandbox, host, port and reason."""

    sandbox_id = models.CharField(max_length=40, blank=True)  # kept after the sandbox is gone
    source = models.CharField(max_length=64)
    host = models.CharField(max_length=300)
    port = models.PositiveIntegerField()
    reason = models.CharField(max_length=32)
    count = models.PositiveIntegerField(default=0)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-last_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["sandbox_id", "host", "port", "reason"], name="one_row_per_denial"
            )
        ]

    def __str__(self) -> str:
        return f"{self.host}:{self.port} from {self.sandbox_id or self.source} ({self.reason})"


class Fence(models.Model):
    """What the open sandboxes' fence (egress.fence) holds on a node, as of its last setting: the digest of
    its rules, or why they could not be set. Start and changes set it again where it differs."""

    node = models.CharField(primary_key=True, max_length=40)
    digest = models.CharField(max_length=64, blank=True)  # "" until set once
    error = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"fence of {self.node}"
