"""RPC methods of tasks and schedules."""

from datetime import datetime
from typing import Any

from django.utils.translation import gettext_lazy as _

from cocoon.errors import field_error
from cocoon.registry import Call, registry
from cocoon.schema import (
    ANY_OBJECT,
    BOOLEAN,
    EMPTY,
    INTEGER,
    STRING,
    TIMESTAMP,
    array,
    enum,
    integer,
    nullable,
    obj,
    string,
)
from sandboxes.methods.lifecycle import SANDBOX_CREATE, SANDBOX_ID
from scheduling import schedules, services
from scheduling.choices import Overlap, StepStatus, TaskStatus

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
    },
    required=("prompt",),
)
TEMPLATE_DESCRIPTION = (
    "A task: prompt, a new sandbox (sandbox: sandbox.create fields) or an existing one (sandboxId), and a "
    "workflow of steps run one after another, each an agent (profile) with a prompt template "
    "({{prompt}}, {{taskId}}, {{reportFile}}, {{workdir}}, {{step}}, {{reportInstructions}}) and a timeout "
    "(default: one claude-code step). The last agent writes a JSON report {ok, summary, autoClose, details?} "
    "to $COCOON_REPORT_FILE (<workdir>/.cocoon/report/<taskId>.json): ok + autoClose -> done and the "
    "task's own sandbox removed (its diff kept); otherwise review."
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


@registry.method(
    "task.create",
    description=f"Create a task and start it at once. {TEMPLATE_DESCRIPTION}",
    params=TEMPLATE,
    result=TASK,
    agent_side=True,
)
def task_create(call: Call) -> dict[str, Any]:
    return services.serialize(services.create_task(call.params, actor=call.actor), call.language)


@registry.method(
    "task.list",
    description="Tasks, newest first (without patches: task.get has them).",
    params=obj(
        {
            "status": array(enum(*TaskStatus.values), minItems=1),
            "scheduleId": SCHEDULE_ID,
            "limit": integer(minimum=1, maximum=1000),
        }
    ),
    result=array(TASK),
    agent_side=True,
)
def task_list(call: Call) -> list[dict[str, Any]]:
    params = call.params
    tasks = services.list_tasks(
        status=params.get("status"), schedule_id=params.get("scheduleId"), limit=params.get("limit", 100)
    )
    return [services.serialize(task, call.language, patch=False) for task in tasks]


@registry.method(
    "task.get",
    description="One task with its steps, report and diff.",
    params=TASK_BY_ID,
    result=TASK,
    agent_side=True,
)
def task_get(call: Call) -> dict[str, Any]:
    return services.serialize(services.get_task(call.params["taskId"]), call.language)


@registry.method(
    "task.cancel",
    description="Cancel a queued or running task (its running agent is stopped; the sandbox stays).",
    params=TASK_BY_ID,
    result=TASK,
    agent_side=True,
)
def task_cancel(call: Call) -> dict[str, Any]:
    return services.serialize(services.cancel_task(call.params["taskId"], actor=call.actor), call.language)


@registry.method(
    "task.approve",
    description="Accept a task in review: done, its own sandbox removed (the diff stays with the task). "
    "With push, the changes are committed and pushed to a branch (default cocoon/<taskId>) first; with "
    "pullRequest, a GitHub pull request is opened from that branch too.",
    params=obj(
        {
            "taskId": TASK_ID,
            "push": obj(
                {
                    "branch": string(minLength=1, maxLength=255),
                    "remote": string(minLength=1, maxLength=100),
                    "message": string(minLength=1, maxLength=10_000),
                }
            ),
            "pullRequest": obj(
                {
                    "title": string(minLength=1, maxLength=300),
                    "body": string(maxLength=60_000),
                    "base": string(minLength=1, maxLength=255),
                }
            ),
        },
        required=("taskId",),
    ),
    result=TASK,
    agent_side=True,
)
def task_approve(call: Call) -> dict[str, Any]:
    params = call.params
    task = services.approve_task(
        params["taskId"], actor=call.actor, push=params.get("push"), pull_request=params.get("pullRequest")
    )
    return services.serialize(task, call.language)


@registry.method(
    "task.reject",
    description="Close a task in review without its changes (cancelled; its sandbox stays for a look).",
    params=TASK_BY_ID,
    result=TASK,
    agent_side=True,
)
def task_reject(call: Call) -> dict[str, Any]:
    return services.serialize(services.reject_task(call.params["taskId"], actor=call.actor), call.language)


@registry.method(
    "schedule.list", description="All schedules, by name.", result=array(SCHEDULE), agent_side=True
)
def schedule_list(call: Call) -> list[dict[str, Any]]:
    return [schedules.serialize(schedule) for schedule in schedules.Schedule.objects.all()]


@registry.method(
    "schedule.get", description="One schedule.", params=SCHEDULE_BY_ID, result=SCHEDULE, agent_side=True
)
def schedule_get(call: Call) -> dict[str, Any]:
    return schedules.serialize(schedules.get_schedule(call.params["scheduleId"]))


@registry.method(
    "schedule.create",
    description="Create a schedule: a cron expression (5 fields or @daily, ...) in a timezone (default "
    "UTC) that creates and starts a task from template when due. overlap: skip (default: nothing starts "
    "while a run is queued or running), queue or parallel. keepRuns finished runs are kept (default 10); "
    "older ones are deleted with their sandboxes.",
    params=obj(SCHEDULE_FIELDS, required=("name", "cron", "template")),
    result=SCHEDULE,
    agent_side=True,
)
def schedule_create(call: Call) -> dict[str, Any]:
    return schedules.serialize(schedules.create_schedule(call.params, actor=call.actor))


@registry.method(
    "schedule.update",
    description="Change fields of a schedule; a new cron, timezone or enabled recomputes nextRunAt.",
    params=obj({"scheduleId": SCHEDULE_ID} | SCHEDULE_FIELDS, required=("scheduleId",)),
    result=SCHEDULE,
    agent_side=True,
)
def schedule_update(call: Call) -> dict[str, Any]:
    params = dict(call.params)
    schedule_id = params.pop("scheduleId")
    return schedules.serialize(schedules.update_schedule(schedule_id, params, actor=call.actor))


@registry.method(
    "schedule.delete",
    description="Delete a schedule; its runs stay as tasks.",
    params=SCHEDULE_BY_ID,
    result=EMPTY,
    agent_side=True,
)
def schedule_delete(call: Call) -> dict[str, Any]:
    schedules.delete_schedule(call.params["scheduleId"], actor=call.actor)
    return {}


@registry.method(
    "schedule.run",
    description="Run a schedule now, outside its cron times (conflict for overlap: skip with a run open).",
    params=SCHEDULE_BY_ID,
    result=TASK,
    agent_side=True,
)
def schedule_run(call: Call) -> dict[str, Any]:
    return services.serialize(
        schedules.run_schedule(call.params["scheduleId"], actor=call.actor), call.language
    )


@registry.method(
    "schedule.preview",
    description="The next times of a cron expression in a timezone, for unsaved input (cron, timezone) or "
    "a saved schedule (scheduleId); after defaults to now.",
    params=obj(
        {
            "cron": string(minLength=1, maxLength=200),
            "timezone": string(minLength=1, maxLength=64),
            "scheduleId": SCHEDULE_ID,
            "count": integer(minimum=1, maximum=100),
            "after": TIMESTAMP,
        },
        anyOf=[{"required": ["cron"]}, {"required": ["scheduleId"]}],
    ),
    result=obj({"cron": STRING, "timezone": STRING, "times": array(TIMESTAMP)}),
    agent_side=True,
)
def schedule_preview(call: Call) -> dict[str, Any]:
    params = call.params
    return schedules.preview(
        expression=params.get("cron"),
        timezone_name=params.get("timezone"),
        schedule_id=params.get("scheduleId"),
        count=params.get("count", 5),
        after=_instant(params["after"]) if "after" in params else None,
    )


def _instant(value: str) -> datetime:
    """RFC 3339 passed the schema; the few spellings Python cannot read are still the caller's error."""
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise field_error("after", _("Has an invalid format.")) from None
