from django.db import models


class ItemState(models.TextChoices):
    OPEN = "open", "open"  # waits for a human (unless snoozed until a time)
    ACKED = "acked", "acknowledged"  # a human has seen it; it stays until its cause goes away
    CLOSED = "closed", "closed"  # its cause went away (the agent was answered, the task approved)


class DeliveryState(models.TextChoices):
    SCHEDULED = "scheduled", "scheduled"  # due at due_at (a channel's delay, quiet hours, a retry)
    SENDING = "sending", "sending"
    SENT = "sent", "sent"
    FAILED = "failed", "failed"  # every attempt failed
    SKIPPED = "skipped", "skipped"  # its item was closed, acknowledged or snoozed before it was due
