"""Celery tasks of agents."""

from celery import shared_task

from agents import poller


@shared_task(name="agents.tasks.poll")
def poll() -> int:
    return poller.poll_all()


@shared_task(name="agents.tasks.watch")
def watch(sandbox_id: str) -> None:
    """Open the sandbox's watcher stream now (a spawn), not at the next tick."""
    poller.watch_sandbox(sandbox_id)


@shared_task(name="agents.tasks.sweep")
def sweep() -> int:
    return poller.sweep_sessions()
