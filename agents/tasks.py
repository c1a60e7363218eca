"""Celery tasks of agents."""

from celery import shared_task

from agents import services


@shared_task(name="agents.tasks.poll")
def poll() -> int:
    return services.poll_all()
