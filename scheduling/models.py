from django.db import models

from cocoon import tenancy
from cocoon.ids import new_id
from scheduling.choices import Overlap, TaskStatus


def new_task_id() -> str:
    return new_id("tk")


def new_schedule_id() -> str:
    return new_id("sc")


class Schedule(tenancy.Owned):
    """A cron expression in a timezone that creates a task from its template whenever it is due.

    next_run_at is kept in UTC and indexed, so a tick asks the database for the due schedules only.
    """

    id = models.CharField(primary_key=True, max_length=40, default=new_schedule_id, editable=False)
    name = models.CharField(max_length=100)  # unique in its project: another's names are not known
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    template = models.JSONField()  # task.create params: prompt, workflow, sandbox or sandboxId, title
    overlap = models.CharField(max_length=10, choices=Overlap.choices, default=Overlap.SKIP)
    keep_runs = models.PositiveIntegerField(default=10)
    enabled = models.BooleanField(default=True)
    next_run_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    skipped_runs = models.PositiveIntegerField(default=0)  # due times that overlap: skip let pass
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="schedule_name_per_project")]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class Task(tenancy.Owned):
    """A unit of work: a prompt, a sandbox, a workflow of agent steps, a status and a report.

    steps holds the run-time state of each workflow step (status, agent, times), so a run that lost
    its worker can be resumed where it stood. runner and heartbeat_at say who drives the run and
    that it is still alive; a stale heartbeat hands the task to another runner.
    """

    id = models.CharField(primary_key=True, max_length=40, default=new_task_id, editable=False)
    title = models.CharField(max_length=200)
    prompt = models.TextField()
    status = models.CharField(
        max_length=10, choices=TaskStatus.choices, default=TaskStatus.QUEUED, db_index=True
    )
    reason = models.JSONField(null=True, blank=True)  # {"key", "params"}: why it failed or was closed
    sandbox_id = models.CharField(max_length=40, blank=True)  # kept after the sandbox is removed
    own_sandbox = models.BooleanField(default=True)  # made for this task, and removed with it
    sandbox_spec = models.JSONField(default=dict)  # sandbox.create params for the task's own sandbox
    workflow = models.JSONField()  # [{profile, prompt, providers, model, timeoutS}]
    steps = models.JSONField(default=list)  # [{status, agentId, startedAt, finishedAt, exitCode}]
    current_step = models.PositiveIntegerField(default=0)
    report = models.JSONField(null=True, blank=True)
    budget = models.JSONField(null=True, blank=True)  # what its agents may spend together (schema.BUDGET)
    diff = models.JSONField(null=True, blank=True)  # {patch, files}, kept when the sandbox is gone
    schedule = models.ForeignKey(
        Schedule, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    scheduled_for = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=200, blank=True)
    runner = models.CharField(max_length=40, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.title} ({self.id})"
