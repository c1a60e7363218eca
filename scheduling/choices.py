from django.db import models


class TaskStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    REVIEW = "review", "review"  # the run is over; a human decides (approve / reject)
    DONE = "done", "done"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


# A run is open while work may still happen in it (overlap, concurrency); finished once nothing will.
OPEN_STATUSES = (TaskStatus.QUEUED, TaskStatus.RUNNING)
FINISHED_STATUSES = (TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED)


class StepStatus(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    BLOCKED = "blocked", "blocked"  # the agent waits for a human decision; the step timeout still runs
    DONE = "done", "done"
    FAILED = "failed", "failed"


class Overlap(models.TextChoices):
    SKIP = "skip", "skip"  # start nothing while a run of the schedule is open
    QUEUE = "queue", "queue"  # create the run, start it when the open one has ended
    PARALLEL = "parallel", "parallel"  # start it at once
