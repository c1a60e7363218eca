"""Celery tasks of usage: take ids or plain values, call a service, nothing else."""

from celery import shared_task

from usage import ingest


@shared_task(name="usage.tasks.collect")
def collect() -> int:
    return ingest.collect()
