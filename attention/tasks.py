"""Celery tasks of attention: take ids or plain values, call a service, nothing else."""

from celery import shared_task

from attention import feed, notify


@shared_task(name="attention.tasks.deliver")
def deliver(delivery_id: str) -> str | None:
    return notify.deliver(delivery_id)


@shared_task(name="attention.tasks.tick")
def tick() -> int:
    """The setup checklist as an item, and deliveries whose Celery message was lost."""
    feed.check_setup()
    return notify.resend_lost()
