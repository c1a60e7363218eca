"""The hand-over of tasks to runners (SPEC §7).

A run is driven by scheduling.runner in a Celery worker; this module decides which queued tasks may
start (a concurrency cap, a schedule's overlap: queue) and claims them, so a task is driven by one
runner at a time however often its message is delivered.
"""

import secrets
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from scheduling.choices import Overlap, TaskStatus
from scheduling.events import publish_task_updated
from scheduling.models import Task

STALE_AFTER_S = 60  # a running task whose runner has not beaten this long is taken over
# The Celery task that drives a run (scheduling.tasks), sent by name: the tasks module sits above this one.
RUN_TASK = "scheduling.tasks.run_task"


def send_to_runner(task_id: str, stale_after_s: float = STALE_AFTER_S) -> None:
    """Send the task to a runner once the surrounding transaction commits."""
    transaction.on_commit(lambda: current_app.send_task(RUN_TASK, args=(task_id, stale_after_s)))


def _waits_for_its_schedule(task: Task) -> bool:
    """overlap: queue: a run starts only when no other run of its schedule is running."""
    return bool(
        task.schedule is not None
        and task.schedule.overlap == Overlap.QUEUE
        and Task.objects.filter(schedule_id=task.schedule_id, status=TaskStatus.RUNNING)
        .exclude(pk=task.pk)
        .exists()
    )


def claim_task(task_id: str, token: str, stale_after_s: float) -> Task | None:
    """Make `token` the task's runner, or None if the task is not ours to run now.

    A queued task is claimed while fewer than COCOON_TASK_CONCURRENCY run; a running one only when
    its runner's heartbeat is older than stale_after_s (its worker died). The conditional UPDATE is
    the lock: of two runners given the same task, one wins. Under SQLite two claims may both see a
    free slot and overshoot the cap by one; the cap keeps worker threads free, it is not a quota.
    """
    now = timezone.now()
    task = Task.objects.select_related("schedule").filter(pk=task_id).first()
    if task is None:
        return None
    if task.status == TaskStatus.QUEUED:
        running = Task.objects.filter(status=TaskStatus.RUNNING).count()
        if running >= settings.COCOON_TASK_CONCURRENCY or _waits_for_its_schedule(task):
            return None
        won = Task.objects.filter(pk=task_id, status=TaskStatus.QUEUED).update(
            status=TaskStatus.RUNNING,
            runner=token,
            heartbeat_at=now,
            started_at=now,
            attempts=F("attempts") + 1,
        )
    elif task.status == TaskStatus.RUNNING:
        cutoff = now - timedelta(seconds=stale_after_s)
        won = Task.objects.filter(
            pk=task_id, status=TaskStatus.RUNNING, runner=task.runner, heartbeat_at__lte=cutoff
        ).update(runner=token, heartbeat_at=now, attempts=F("attempts") + 1)
    else:
        return None
    if not won:
        return None
    task.refresh_from_db()
    if task.status == TaskStatus.RUNNING and task.attempts == 1:
        publish_task_updated(task)
    return task


def new_runner_token() -> str:
    return secrets.token_hex(8)


def dispatch_queued() -> int:
    """Hand queued tasks to runners while there are free slots; returns how many were sent.

    Called when a run ends, by the periodic recovery and at start-up, so a queued task whose message
    was lost (the in-memory broker does not outlive cocoond) is still started.
    """
    free = settings.COCOON_TASK_CONCURRENCY - Task.objects.filter(status=TaskStatus.RUNNING).count()
    if free <= 0:
        return 0
    sent = 0
    for task in (
        Task.objects.select_related("schedule").filter(status=TaskStatus.QUEUED).order_by("created_at")
    ):
        if sent >= free:
            break
        if _waits_for_its_schedule(task):
            continue
        send_to_runner(task.id)
        sent += 1
    return sent


def recover_runs(stale_after_s: float = STALE_AFTER_S) -> int:
    """Send every running task whose runner stopped beating to a new runner, then dispatch."""
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    stale = list(
        Task.objects.filter(status=TaskStatus.RUNNING, heartbeat_at__lte=cutoff).values_list("id", flat=True)
    )
    for task_id in stale:
        send_to_runner(task_id, stale_after_s)
    dispatch_queued()
    return len(stale)
