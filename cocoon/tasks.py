"""Celery tasks of the core: take ids or plain values, call a service, nothing else."""

from celery import shared_task

from cocoon import activity, config


@shared_task(name="cocoon.tasks.prune_activity")
def prune_activity(older_than_days: int | None = None) -> int:
    if older_than_days is None:
        older_than_days = config.get_settings()["general"]["activityRetentionDays"]
    return activity.prune(older_than_days)
