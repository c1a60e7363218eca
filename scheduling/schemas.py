"""The wire shapes of tasks and schedules: their JSON Schemas and the dicts that match them, side by side."""

from datetime import datetime, timedelta
from typing import Any

from cocoon import config
from cocoon.schema import (
    ANY_OBJECT,
    BOOLEAN,
    BUDGET,
    INTEGER,
    STRING,
    TIMESTAMP,
    array,
    enum,
    integer,
    nullable,
    obj,
    string,
    timestamp,
)
from sandboxes.schemas import SANDBOX_CREATE, SANDBOX_ID
from scheduling.choices import Overlap, StepStatus, TaskStatus
from scheduling.cron import Preview
from scheduling.models import Schedule, Task
from scheduling.reasons import render_closing_reason

TASK_ID = string(pattern="^tk_[a-z0-9]+$", maxLength=40)
SCHEDULE_ID = string(pattern="^sc_[a-z0-9]+$", maxLength=40)
NAME = string(minLength=1, maxLength=64)
STEP_FIELDS = {
    "profile": NAME,
    "prompt": string(maxLength=100_000),
    "providers": array(NAME, maxItems=10),
    "model": string(minLength=1, maxLength=200),
    "timeoutS": integer(minimum=1, maximum=86_400),
}
TEMPLATE = obj(
    {
        "prompt": string(minLength=1, maxLength=100_000),
        "title": string(minLength=1, maxLength=200),
        "sandboxId": SANDBOX_ID,
        "sandbox": obj({k: v for k, v in SANDBOX_CREATE["properties"].items() if k != "name"}),
        "workflow": array(obj(STEP_FIELDS, required=("profile",)), minItems=1, maxItems=20),
        "budget": BUDGET,  # what its agents may spend together
    },
    required=("prompt",),
)
NULLABLE_TIME = nullable(TIMESTAMP)
TASK = obj(
    {
        "id": STRING,
        "title": STRING,
        "prompt": STRING,
        "status": enum(*TaskStatus.values),
        "reason": nullable(STRING),
        "reasonCode": nullable(STRING),
        "sandboxId": nullable(STRING),
        "ownSandbox": BOOLEAN,
        "budget": nullable(BUDGET),
        "steps": array(
            obj(
                STEP_FIELDS
                | {
                    "status": enum(*StepStatus.values),
                    "agentId": STRING,
                    "startedAt": TIMESTAMP,
                    "finishedAt": TIMESTAMP,
                    "exitCode": nullable(INTEGER),
                }
            )
        ),
        "currentStep": INTEGER,
        "agentIds": array(STRING),
        "report": nullable(ANY_OBJECT),
        "diff": nullable(ANY_OBJECT),
        "scheduleId": nullable(STRING),
        "scheduledFor": NULLABLE_TIME,
        "createdBy": STRING,
        "attempts": INTEGER,
        # A failed or cancelled task's own sandbox is removed then (settings.tasks.keepFailedSandboxHours).
        "sandboxKeptUntil": NULLABLE_TIME,
        "createdAt": TIMESTAMP,
        "startedAt": NULLABLE_TIME,
        "finishedAt": NULLABLE_TIME,
        "updatedAt": TIMESTAMP,
    }
)
TASK_BY_ID = obj({"taskId": TASK_ID}, required=("taskId",))
SCHEDULE_FIELDS = {
    "name": string(pattern="^[A-Za-z0-9][A-Za-z0-9 _.-]{0,99}$"),
    "cron": string(minLength=1, maxLength=200),
    "timezone": string(minLength=1, maxLength=64),
    "template": TEMPLATE,
    "overlap": enum(*Overlap.values),
    "keepRuns": integer(minimum=1, maximum=1000),
    "enabled": BOOLEAN,
}
SCHEDULE = obj(
    SCHEDULE_FIELDS
    | {
        "id": STRING,
        "nextRunAt": NULLABLE_TIME,
        "lastRunAt": NULLABLE_TIME,
        "skippedRuns": INTEGER,
        "createdAt": TIMESTAMP,
        "updatedAt": TIMESTAMP,
    }
)
SCHEDULE_BY_ID = obj({"scheduleId": SCHEDULE_ID}, required=("scheduleId",))
PREVIEW = obj({"cron": STRING, "timezone": STRING, "times": array(TIMESTAMP)})


def _kept_until(task: Task) -> datetime | None:
    if not (task.own_sandbox and task.finished_at) or task.status not in (
        TaskStatus.FAILED,
        TaskStatus.CANCELLED,
    ):
        return None
    return task.finished_at + timedelta(hours=config.get_settings()["tasks"]["keepFailedSandboxHours"])


def serialize_task(task: Task, language: str, *, patch: bool = True) -> dict[str, Any]:
    diff = task.diff
    if diff is not None and not patch:
        diff = {"files": diff["files"]}
    return {
        "id": task.id,
        "title": task.title,
        "prompt": task.prompt,
        "status": task.status,
        "reason": render_closing_reason(task.reason, language),
        "reasonCode": task.reason["key"] if task.reason else None,
        "sandboxId": task.sandbox_id or None,
        "ownSandbox": task.own_sandbox,
        "budget": task.budget,
        "steps": [definition | state for definition, state in zip(task.workflow, task.steps, strict=True)],
        "currentStep": task.current_step,
        "agentIds": [state["agentId"] for state in task.steps if state.get("agentId")],
        "report": task.report,
        "diff": diff,
        "scheduleId": task.schedule_id,
        "scheduledFor": timestamp(task.scheduled_for),
        "createdBy": task.created_by,
        "attempts": task.attempts,
        "sandboxKeptUntil": timestamp(_kept_until(task)),
        "createdAt": task.created_at.isoformat(),
        "startedAt": timestamp(task.started_at),
        "finishedAt": timestamp(task.finished_at),
        "updatedAt": task.updated_at.isoformat(),
    }


def serialize_schedule(schedule: Schedule) -> dict[str, Any]:
    return {
        "id": schedule.id,
        "name": schedule.name,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "template": schedule.template,
        "overlap": schedule.overlap,
        "keepRuns": schedule.keep_runs,
        "enabled": schedule.enabled,
        "nextRunAt": timestamp(schedule.next_run_at),
        "lastRunAt": timestamp(schedule.last_run_at),
        "skippedRuns": schedule.skipped_runs,
        "createdAt": schedule.created_at.isoformat(),
        "updatedAt": schedule.updated_at.isoformat(),
    }


def serialize_preview(preview: Preview) -> dict[str, Any]:
    return {
        "cron": preview.cron,
        "timezone": preview.timezone,
        "times": [instant.isoformat() for instant in preview.times],
    }
