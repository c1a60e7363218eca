"""Tasks: create, list, cancel, approve, reject, and close a task when its run or a human ends it (SPEC §7).

scheduling.dispatch hands queued tasks to runners; scheduling.runner drives a run and closes it here.
"""

import contextlib
import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agents import services as agents
from cocoon import activity, config, tenancy
from cocoon.actors import SYSTEM_ACTOR, Actor
from cocoon.errors import CocoonError, Conflict, NotFound
from cocoon.lookup import get_or_not_found, must_exist
from sandboxes import files
from sandboxes import services as sandboxes
from sandboxes.models import Sandbox
from scheduling import workflow
from scheduling.choices import FINISHED_STATUSES, OPEN_STATUSES, StepStatus, TaskStatus
from scheduling.dispatch import dispatch_queued, send_to_runner
from scheduling.events import publish_task_updated
from scheduling.models import Schedule, Task
from scheduling.reasons import closing_reason

logger = logging.getLogger(__name__)


TASK_NOT_FOUND = _("Task %(id)s does not exist.")


def get_task(task_id: str) -> Task:
    return get_or_not_found(Task, task_id, TASK_NOT_FOUND, id=task_id)


def check_visible(actor: Actor, task_id: str) -> None:
    """registry.owned's check of taskId (cocoon.tenancy)."""
    must_exist(Task.objects.filter(tenancy.visible(actor)), task_id, TASK_NOT_FOUND, id=task_id)


def list_tasks(
    actor: Actor, *, status: list[str] | None = None, schedule_id: str | None = None, limit: int = 100
) -> list[Task]:
    tasks = Task.objects.filter(tenancy.visible(actor))
    if status:
        tasks = tasks.filter(status__in=status)
    if schedule_id:
        tasks = tasks.filter(schedule_id=schedule_id)
    return list(tasks[:limit])


def create_task(
    params: dict[str, Any],
    *,
    actor: Actor,
    schedule: Schedule | None = None,
    scheduled_for: Any = None,
    start: bool = True,
) -> Task:
    """A queued task, handed to a runner once the transaction commits (unless start is False)."""
    checked = workflow.check_template(params)
    if schedule is None:  # a schedule's runs were checked when its template was written
        workflow.check_author(checked, actor)
    # Its budget carved out of its maker's token's if that has a budget ceiling (the runner acts as the
    # server: what the task's sandbox and agents spend is bounded by the task's budget).
    with tenancy.carving(actor, checked.get("budget")) as budget:
        return _create_task(checked, actor, schedule, scheduled_for, start, budget)


def _create_task(
    checked: dict[str, Any],
    actor: Actor,
    schedule: Schedule | None,
    scheduled_for: Any,
    start: bool,
    budget: dict[str, Any] | None,
) -> Task:
    prompt = checked["prompt"]
    task = Task(
        title=checked.get("title") or (prompt.strip().splitlines() or [""])[0][:200] or "task",
        prompt=prompt,
        sandbox_id=checked.get("sandboxId", ""),
        own_sandbox=not checked.get("sandboxId"),
        sandbox_spec=checked.get("sandbox", {}),
        workflow=checked["workflow"],
        steps=[{"status": StepStatus.PENDING} for _step in checked["workflow"]],
        schedule=schedule,
        scheduled_for=scheduled_for,
        created_by=actor.label,
        budget=budget,
        # A schedule's run is the schedule's owner's, whoever (the server) starts it.
        **(tenancy.same_owner(schedule) if schedule else tenancy.creation(actor)),
    )
    with transaction.atomic():
        task.save(force_insert=True)
        activity.record(
            "task.created", {"task": task.id, "title": task.title}, actor=actor, sandbox_id=task.sandbox_id
        )
        publish_task_updated(task)
        if start:
            send_to_runner(task.id)
    return task


def close_task(
    task: Task,
    status: str,
    *,
    reason: dict[str, Any] | None = None,
    activity_key: str,
    actor: Actor | None,
) -> Task:
    """Put a task into a final (or review) status and say so; drop its own sandbox when it is done."""
    task.status = status
    task.reason = reason
    task.runner = ""
    if status != TaskStatus.REVIEW:
        task.finished_at = timezone.now()
    params = {"task": task.id}
    if status == TaskStatus.REVIEW:
        params["summary"] = str((task.report or {}).get("summary", ""))[:500]
    if status == TaskStatus.DONE or (status in FINISHED_STATUSES and not _keep_hours()):
        remove_own_sandbox(task)  # first: whoever sees "done" finds the sandbox gone
    with transaction.atomic():
        task.save()
        publish_task_updated(task)
        activity.record(activity_key, params, actor=actor or SYSTEM_ACTOR, sandbox_id=task.sandbox_id)
    if status in FINISHED_STATUSES and task.schedule_id:
        prune_schedule_runs(task.schedule_id)
    dispatch_queued()
    return task


def _keep_hours() -> int:
    """settings.tasks.keepFailedSandboxHours: how long a failed or cancelled task's own sandbox stays."""
    return int(config.get_settings()["tasks"]["keepFailedSandboxHours"])


def remove_expired_sandboxes(now: datetime | None = None) -> int:
    """Remove the own sandboxes of failed and cancelled tasks that ended keepFailedSandboxHours ago (the
    scheduling tick); how many went."""
    ended_before = (now or timezone.now()) - timedelta(hours=_keep_hours())
    expired = Task.objects.filter(
        status__in=[TaskStatus.FAILED, TaskStatus.CANCELLED],
        own_sandbox=True,
        finished_at__lte=ended_before,
        sandbox_id__in=Sandbox.objects.values("id"),
    )
    removed = 0
    for task in expired:
        remove_own_sandbox(task)
        removed += 1
    return removed


def retry_task(task_id: str, *, actor: Actor) -> Task:
    """Queue a failed task again from its failed step (that step's agent is started anew, the ones before
    stay done); from the first step with a new sandbox when its own one is gone, as the earlier steps'
    work went with it."""
    task = get_task(task_id)
    if task.status != TaskStatus.FAILED:
        raise Conflict(
            _("Task %(id)s is %(status)s: only a failed task can be retried."), id=task.id, status=task.status
        )
    if not Sandbox.objects.filter(pk=task.sandbox_id).exists():
        if not task.own_sandbox:
            raise Conflict(
                _("Task %(id)s ran in sandbox %(sandbox)s, which is gone: create a new task."),
                id=task.id,
                sandbox=task.sandbox_id,
            )
        task.sandbox_id, task.current_step = "", 0
    else:  # the report of the failed run must not pass for the new one's
        with contextlib.suppress(CocoonError):
            files.delete_path(task.sandbox_id, workflow.report_path(task.id), False, actor=actor)
    for index in range(task.current_step, len(task.steps)):
        task.steps[index] = {"status": StepStatus.PENDING}
    task.status, task.reason, task.finished_at, task.report, task.attempts = (
        TaskStatus.QUEUED,
        None,
        None,
        None,
        0,
    )
    with transaction.atomic():
        task.save()
        activity.record(
            "task.retried",
            {"task": task.id, "step": task.current_step + 1},
            actor=actor,
            sandbox_id=task.sandbox_id,
        )
        publish_task_updated(task)
        send_to_runner(task.id)
    return task


def remove_own_sandbox(task: Task) -> None:
    """Remove the sandbox made for the task, if it is still there; a failure leaves it for reconcile."""
    if not (task.own_sandbox and task.sandbox_id):
        return
    try:
        sandboxes.delete_sandbox(task.sandbox_id, actor=SYSTEM_ACTOR)
    except NotFound:
        pass
    except CocoonError as error:
        logger.warning("could not remove sandbox %s of task %s: %s", task.sandbox_id, task.id, error)


def prune_schedule_runs(schedule_id: str) -> int:
    """Delete the schedule's finished runs beyond keepRuns, with their own sandboxes; how many went."""
    schedule = Schedule.objects.filter(pk=schedule_id).first()
    if schedule is None:
        return 0
    finished = Task.objects.filter(schedule=schedule, status__in=FINISHED_STATUSES).order_by("-created_at")
    old = list(finished[schedule.keep_runs :])
    for task in old:
        if task.own_sandbox and Sandbox.objects.filter(pk=task.sandbox_id).exists():
            remove_own_sandbox(task)
        task.delete()
    return len(old)


def _reviewable(task_id: str) -> Task:
    task = get_task(task_id)
    if task.status != TaskStatus.REVIEW:
        raise Conflict(
            _("Task %(id)s is %(status)s, not waiting for a review."),
            id=task.id,
            status=task.status,
        )
    return task


def approve_task(
    task_id: str,
    *,
    actor: Actor,
    push: dict[str, Any] | None = None,
    pull_request: dict[str, Any] | None = None,
) -> Task:
    """Accept a task in review: optionally commit + push its changes and open a pull request, then done."""
    from sandboxes import git
    from sandboxes.schemas import serialize_pull_request

    task = _reviewable(task_id)
    if push or pull_request:
        sandbox = sandboxes.get_sandbox(task.sandbox_id).ensure_running()
        branch = (push or {}).get("branch") or f"cocoon/{task.id}"
        remote = (push or {}).get("remote", "origin")
        message = (push or {}).get("message") or task.title
        with contextlib.suppress(git.NothingToCommit):  # push what is there
            git.git_commit(sandbox.id, message, None, None, actor=actor)
        git.git_push(sandbox.id, branch, remote, actor=actor)
        if pull_request:
            created = git.create_pull_request(
                sandbox.id,
                pull_request.get("title") or task.title,
                pull_request.get("body") or str((task.report or {}).get("summary", "")),
                pull_request.get("base") or sandbox.branch or "main",
                branch,
                remote,
                actor=actor,
            )
            task.report = (task.report or {}) | {"pullRequest": serialize_pull_request(created)}
    return close_task(task, TaskStatus.DONE, activity_key="task.approved", actor=actor)


def reject_task(task_id: str, *, actor: Actor) -> Task:
    """Close a task in review without taking its changes; its own sandbox stays as a failed one's does."""
    task = _reviewable(task_id)
    return close_task(
        task,
        TaskStatus.CANCELLED,
        reason=closing_reason("rejected", actor=actor.name),
        activity_key="task.rejected",
        actor=actor,
    )


def cancel_task(task_id: str, *, actor: Actor) -> Task:
    """Stop a queued or running task; its runner notices at its next heartbeat and stops the agent."""
    reason = closing_reason("cancelled", actor=actor.name)
    return _stop_task(get_task(task_id), TaskStatus.CANCELLED, reason, "task.cancelled", actor)


def fail_task(task_id: str, reason: dict[str, Any], *, actor: Actor) -> Task:
    """Stop a queued or running task as failed, for a reason found outside its run (a budget spent)."""
    return _stop_task(get_task(task_id), TaskStatus.FAILED, reason, "task.failed", actor)


def _stop_task(task: Task, status: str, reason: dict[str, Any], activity_key: str, actor: Actor) -> Task:
    if task.status not in OPEN_STATUSES:
        raise Conflict(
            _("Task %(id)s is %(status)s and cannot be stopped."),
            id=task.id,
            status=task.status,
        )
    agent_id = task.steps[task.current_step].get("agentId") if task.status == TaskStatus.RUNNING else None
    if task.status == TaskStatus.RUNNING:
        task.steps[task.current_step]["status"] = StepStatus.FAILED
    task = close_task(task, status, reason=reason, activity_key=activity_key, actor=actor)
    if agent_id:
        try:
            agents.kill_agent(agent_id, actor=actor)
        except CocoonError:
            logger.info("the agent %s of stopped task %s is already gone", agent_id, task.id)
    return task
