import secrets

from django.db import models
from django.db.models import Q

from attention.choices import DeliveryState, ItemState
from cocoon.choices import AttentionKind, Visibility
from cocoon.ids import new_id


def new_item_id() -> str:
    return new_id("at")


def new_delivery_id() -> str:
    return new_id("nd")


def new_link_nonce() -> str:
    return secrets.token_urlsafe(12)


class Item(models.Model):
    """Something that waits for a human: an agent's question, a task to review, a failed run.

    One item per cause (kind + subject) is live at a time; it closes by itself when its cause goes away.
    """

    id = models.CharField(primary_key=True, max_length=40, default=new_item_id, editable=False)
    kind = models.CharField(max_length=20, choices=AttentionKind.choices)
    subject = models.CharField(max_length=80)  # the agent, task or schedule id, or "setup"
    state = models.CharField(max_length=10, choices=ItemState.choices, default=ItemState.OPEN)
    visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.AGENT)
    params = models.JSONField(default=dict)  # what its title names (rendered in each reader's language)
    detail = models.TextField(blank=True)  # the question on the agent's screen, the error, ...
    sandbox_id = models.CharField(max_length=40, blank=True, db_index=True)
    agent_id = models.CharField(max_length=40, blank=True)
    task_id = models.CharField(max_length=40, blank=True)
    schedule_id = models.CharField(max_length=40, blank=True)
    opened_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    acked_at = models.DateTimeField(null=True, blank=True)
    acked_by = models.CharField(max_length=200, blank=True)
    snoozed_until = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    # The answer link works while it names this nonce: an answer draws a new one (single use).
    link_nonce = models.CharField(max_length=32, default=new_link_nonce)
    # When it was answered through its link; an agent still blocked after that is asked again: sent again.
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-opened_at"]
        indexes = [models.Index(fields=["subject", "state"]), models.Index(fields=["state", "opened_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "subject"],
                condition=~Q(state=ItemState.CLOSED),
                name="one_live_item_per_cause",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject} ({self.id})"


class Delivery(models.Model):
    """One item sent (or to be sent) to one channel: the delivery log, and the retry queue."""

    id = models.CharField(primary_key=True, max_length=40, default=new_delivery_id, editable=False)
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=32)
    state = models.CharField(max_length=10, choices=DeliveryState.choices, default=DeliveryState.SCHEDULED)
    due_at = models.DateTimeField(db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)  # the last attempt's, bounded
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state", "due_at"])]

    def __str__(self) -> str:
        return f"{self.item_id} -> {self.channel} ({self.state})"
