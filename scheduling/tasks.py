"""Celery tasks of scheduling: take ids or plain values, call a service, nothing else."""

from celery import shared_task

from scheduling import runner, schedules, services
from scheduling.dispatch import RUN_TASK, STALE_AFTER_S, recover_runs


@shared_task(name=RUN_TASK)
def run_task(task_id: str, stale_after_s: float = STALE_AFTER_S) -> str | None:
    return runner.drive_task(task_id, stale_after_s)


@shared_task(name="scheduling.tasks.tick")
def tick() -> int:
    fired = len(schedules.tick())
    services.remove_expired_sandboxes()  # failed runs' sandboxes, kept for a look until then
    return fired


@shared_task(name="scheduling.tasks.recover")
def recover() -> int:
    return recover_runs()
