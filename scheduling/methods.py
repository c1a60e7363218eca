"""RPC methods of tasks and schedules."""

from datetime import datetime
from typing import Any

from django.utils.translation import gettext_lazy as _

from cocoon.errors import field_error
from cocoon.registry import Call, registry
from cocoon.schema import (
    EMPTY,
    TIMESTAMP,
    array,
    enum,
    integer,
    obj,
    string,
)
from scheduling import schedules, services
from scheduling.choices import TaskStatus
from scheduling.schemas import (
    PREVIEW,
    SCHEDULE,
    SCHEDULE_BY_ID,
    SCHEDULE_FIELDS,
    SCHEDULE_ID,
    TASK,
    TASK_BY_ID,
    TASK_ID,
    TEMPLATE,
    serialize_preview,
    serialize_schedule,
    serialize_task,
)

TEMPLATE_DESCRIPTION = (
    "A task: prompt, a new sandbox (sandbox: sandbox.create fields) or an existing one (sandboxId), and a "
    "workflow of steps run one after another, each an agent (profile) with a prompt template "
    "({{prompt}}, {{taskId}}, {{reportFile}}, {{workdir}}, {{step}}, {{reportInstructions}}) and a timeout "
    "(default: one claude-code step). The last agent writes a JSON report {ok, summary, autoClose, details?} "
    "to $COCOON_REPORT_FILE (<workdir>/.cocoon/report/<taskId>.json): ok + autoClose -> done and the "
    "task's own sandbox removed (its diff kept); otherwise review."
)


@registry.method(
    "task.create",
    description=f"Create a task and start it at once. {TEMPLATE_DESCRIPTION}",
    params=TEMPLATE,
    result=TASK,
    agent_side=True,
)
def task_create(call: Call) -> dict[str, Any]:
    return serialize_task(services.create_task(call.params, actor=call.actor), call.language)


@registry.method(
    "task.list",
    reads=True,
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
        call.actor,
        status=params.get("status"),
        schedule_id=params.get("scheduleId"),
        limit=params.get("limit", 100),
    )
    return [serialize_task(task, call.language, patch=False) for task in tasks]


@registry.method(
    "task.get",
    reads=True,
    description="One task with its steps, report and diff.",
    params=TASK_BY_ID,
    result=TASK,
    agent_side=True,
)
def task_get(call: Call) -> dict[str, Any]:
    return serialize_task(services.get_task(call.params["taskId"]), call.language)


@registry.method(
    "task.cancel",
    description="Cancel a queued or running task (its running agent is stopped; its own sandbox stays for "
    "settings.tasks.keepFailedSandboxHours).",
    params=TASK_BY_ID,
    result=TASK,
    agent_side=True,
)
def task_cancel(call: Call) -> dict[str, Any]:
    return serialize_task(services.cancel_task(call.params["taskId"], actor=call.actor), call.language)


@registry.method(
    "task.retry",
    description="Queue a failed task again from its failed step (that step's agent is started anew; the "
    "steps before stay done). When its own sandbox was removed meanwhile (settings.tasks."
    "keepFailedSandboxHours), it starts over from the first step in a new one.",
    params=TASK_BY_ID,
    result=TASK,
    agent_side=True,
)
def task_retry(call: Call) -> dict[str, Any]:
    return serialize_task(services.retry_task(call.params["taskId"], actor=call.actor), call.language)


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
    return serialize_task(task, call.language)


@registry.method(
    "task.reject",
    description="Close a task in review without its changes (cancelled; its sandbox stays for a look).",
    params=TASK_BY_ID,
    result=TASK,
    agent_side=True,
)
def task_reject(call: Call) -> dict[str, Any]:
    return serialize_task(services.reject_task(call.params["taskId"], actor=call.actor), call.language)


@registry.method(
    "schedule.list",
    reads=True,
    description="All schedules, by name.",
    result=array(SCHEDULE),
    agent_side=True,
)
def schedule_list(call: Call) -> list[dict[str, Any]]:
    return [serialize_schedule(schedule) for schedule in schedules.list_schedules(call.actor)]


@registry.method(
    "schedule.get",
    reads=True,
    description="One schedule.",
    params=SCHEDULE_BY_ID,
    result=SCHEDULE,
    agent_side=True,
)
def schedule_get(call: Call) -> dict[str, Any]:
    return serialize_schedule(schedules.get_schedule(call.params["scheduleId"]))


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
    return serialize_schedule(schedules.create_schedule(call.params, actor=call.actor))


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
    return serialize_schedule(schedules.update_schedule(schedule_id, params, actor=call.actor))


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
    return serialize_task(schedules.run_schedule(call.params["scheduleId"], actor=call.actor), call.language)


@registry.method(
    "schedule.preview",
    reads=True,
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
    result=PREVIEW,
    agent_side=True,
)
def schedule_preview(call: Call) -> dict[str, Any]:
    params = call.params
    preview = schedules.preview(
        expression=params.get("cron"),
        timezone_name=params.get("timezone"),
        schedule_id=params.get("scheduleId"),
        count=params.get("count", 5),
        after=_instant(params["after"]) if "after" in params else None,
    )
    return serialize_preview(preview)


def _instant(value: str) -> datetime:
    """RFC 3339 passed the schema; the few spellings Python cannot read are still the caller's error."""
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise field_error("after", _("Has an invalid format.")) from None
