"""Tasks and schedules: the task list (live), a task with its steps, report and kept diff and its review
actions; the schedules with a form that previews the next run times as the user types.

A task form and a schedule's template are the same `task.create` body, read by template_from().
"""

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from cocoon.errors import CocoonError
from sandboxes.choices import NetworkMode
from scheduling.choices import OPEN_STATUSES, Overlap, StepStatus, TaskStatus
from ui.diff import diff_context
from ui.filters import filtered
from ui.usage_views import BudgetForm, budget_section, set_budget, spent
from ui.web import call, done, form_errors, form_number, method_of, page, profiles, show
from usage.choices import Scope

TASK_ACTIONS = {
    "cancel": "task.cancel",
    "approve": "task.approve",
    "reject": "task.reject",
    "retry": "task.retry",
}
SCHEDULE_ACTIONS = {"run": "schedule.run", "delete": "schedule.delete"}
SCHEDULE_DEFAULTS: dict[str, Any] = {
    "timezone": "UTC",
    "overlap": Overlap.SKIP,
    "keepRuns": 10,
    "enabled": True,
}


# -- the task form (a task.create body) ---------------------------------------------------------------


def template_from(form: Any) -> dict[str, Any]:
    """A task.create body from the form; steps without a profile are left out (the blank spare row)."""
    template: dict[str, Any] = {"prompt": form.get("prompt", "").replace("\r\n", "\n").strip()}
    if title := form.get("title", "").strip():
        template["title"] = title
    if form.get("source") == "existing":
        template["sandboxId"] = form.get("sandboxId", "")
    elif sandbox := {
        key: form[key].strip() for key in ("repo", "branch", "network") if form.get(key, "").strip()
    }:
        template["sandbox"] = sandbox
    steps = []
    rows = zip(
        form.getlist("stepProfile"), form.getlist("stepPrompt"), form.getlist("stepTimeoutS"), strict=False
    )
    for profile, prompt, timeout in rows:
        if not profile:
            continue
        step: dict[str, Any] = {"profile": profile}
        if prompt.strip():
            step["prompt"] = prompt.replace("\r\n", "\n")
        if timeout.strip():
            step["timeoutS"] = form_number(timeout.strip())
        steps.append(step)
    if steps:
        template["workflow"] = steps
    return template


def _form_options(request: HttpRequest, template: dict[str, Any]) -> dict[str, Any]:
    """What the task form shows: the values so far, one spare step row, profiles, sandboxes to reuse."""
    return {
        "template": template,
        "steps": [*template.get("workflow", []), {}],
        "profiles": [profile["name"] for profile in profiles(request)],
        "running": [sb for sb in call(request, "sandbox.list") if sb["state"] == "running"],
        "networks": NetworkMode.values,
    }


# -- tasks -------------------------------------------------------------------------------------------


@page()
def tasks(request: HttpRequest) -> HttpResponse:
    template: dict[str, Any] = {}
    errors = None
    if request.method == "POST":
        template = template_from(request.POST)
        try:
            task = call(request, "task.create", **template)
        except CocoonError as error:
            errors = form_errors(error)
        else:
            return redirect("ui:task", task_id=task["id"])
    listed = [task | {"stepsDone": _steps_done(task)} for task in call(request, "task.list")]
    shown, listing = filtered(request, listed, search=("title", "id"), by=("status",))
    context = {"tasks": shown, "listing": listing, "errors": errors} | _form_options(request, template)
    return show(request, "ui/tasks.html", context, status=400 if errors else 200)


def _steps_done(task: dict[str, Any]) -> int:
    return sum(step["status"] == StepStatus.DONE for step in task["steps"])


@page()
def task(request: HttpRequest, task_id: str) -> HttpResponse:
    return _task_page(request, task_id)


def _task_page(request: HttpRequest, task_id: str, posted: BudgetForm | None = None) -> HttpResponse:
    current = call(request, "task.get", taskId=task_id)
    diff = current["diff"] or {"files": [], "patch": ""}
    sandbox_exists = bool(current["sandboxId"]) and any(
        sb["id"] == current["sandboxId"] for sb in call(request, "sandbox.list")
    )
    names = {}
    if sandbox_exists:  # its steps' agents by name (an agent goes with its sandbox)
        names = {
            agent["id"]: agent["name"]
            for agent in call(request, "agent.list", sandboxId=current["sandboxId"])
        }
    current["steps"] = [step | {"agentName": names.get(step.get("agentId", ""))} for step in current["steps"]]
    context = {
        "task": current,
        "open": current["status"] in OPEN_STATUSES,
        "in_review": current["status"] == TaskStatus.REVIEW,
        **diff_context(diff, request.GET.get("view")),
        "report_details": json.dumps((current["report"] or {}).get("details"), indent=2, ensure_ascii=False),
        "sandbox_exists": sandbox_exists,
        "spend": spent(call(request, "usage.summary", groupBy="task", taskId=task_id)),
        "budget": budget_section(request, Scope.TASK, task_id, current["budget"], posted),
    }
    return show(request, "ui/task.html", context, status=400 if posted else 200)


@page(admin=True)
@require_POST
def task_budget(request: HttpRequest, task_id: str) -> HttpResponse:
    return set_budget(request, Scope.TASK, task_id, _task_page)


def _approval(form: Any) -> dict[str, Any]:
    """approve's push and pullRequest from the form: a pull request title implies a push."""
    params: dict[str, Any] = {}
    branch = form.get("branch", "").strip()
    if form.get("push") or branch or form.get("prTitle", "").strip():
        params["push"] = {"branch": branch} if branch else {}
    if title := form.get("prTitle", "").strip():
        params["pullRequest"] = {"title": title}
    return params


@page()
@require_POST
def task_action(request: HttpRequest, task_id: str, action: str) -> HttpResponse:
    method = method_of(TASK_ACTIONS, action)
    params = _approval(request.POST) if action == "approve" else {}
    result = call(request, method, taskId=task_id, **params)
    messages = {
        "cancel": _("The task was cancelled."),
        "approve": _("Approved."),
        "reject": _("Rejected."),
        "retry": _("Started again from the failed step."),
    }
    return done(request, reverse("ui:task", args=[task_id]), messages[action], status=result["status"])


# -- schedules ---------------------------------------------------------------------------------------


@page()
def schedules(request: HttpRequest) -> HttpResponse:
    return show(request, "ui/schedules.html", {"schedules": call(request, "schedule.list")})


def _schedule_from(form: Any) -> dict[str, Any]:
    return {
        "name": form.get("name", "").strip(),
        "cron": form.get("cron", "").strip(),
        "timezone": form.get("timezone", "").strip() or "UTC",
        "overlap": form.get("overlap", ""),
        "keepRuns": form_number(form.get("keepRuns", "").strip()),
        "enabled": form.get("enabled") == "on",
        "template": template_from(form),
    }


def time_label(instant: str) -> str:
    """An instant as the schedule's zone sees it: 2025-03-30 03:00 +02:00."""
    return f"{instant[:16].replace('T', ' ')} {instant[19:]}"


def _preview(request: HttpRequest, cron: str, timezone: str) -> list[tuple[str, str]]:
    """The next times for the form as first shown; the script keeps them current as the user types."""
    try:
        times = call(request, "schedule.preview", cron=cron, timezone=timezone)["times"] if cron else []
    except CocoonError:
        return []
    return [(time, time_label(time)) for time in times]


@page()
def schedule_form(request: HttpRequest, schedule_id: str | None = None) -> HttpResponse:
    """A new schedule, or one to edit (with its recent runs)."""
    schedule = call(request, "schedule.get", scheduleId=schedule_id) if schedule_id else SCHEDULE_DEFAULTS
    errors = None
    if request.method == "POST":
        params = _schedule_from(request.POST)
        schedule = params | {"id": schedule_id}  # as typed, to show again with the errors
        try:
            if schedule_id:
                saved = call(request, "schedule.update", scheduleId=schedule_id, **params)
            else:
                saved = call(request, "schedule.create", **params)
        except CocoonError as error:
            errors = form_errors(error, prefix="template.")
        else:
            return done(request, reverse("ui:schedule", args=[saved["id"]]), _("Schedule saved."))
    context = {
        "schedule": schedule,
        "schedule_id": schedule_id,
        "errors": errors,
        "overlaps": Overlap.values,
        "preview": _preview(request, schedule.get("cron", ""), schedule.get("timezone", "")),
        "runs": [run | {"stepsDone": _steps_done(run)} for run in _runs(request, schedule_id)],
    } | _form_options(request, schedule.get("template", {}))
    return show(request, "ui/schedule.html", context, status=400 if errors else 200)


def _runs(request: HttpRequest, schedule_id: str | None) -> list[dict[str, Any]]:
    return call(request, "task.list", scheduleId=schedule_id, limit=20) if schedule_id else []


@page()
def schedule_preview(request: HttpRequest) -> JsonResponse:
    """schedule.preview for the form's unsaved cron and timezone (the page's script asks as one types)."""
    params = {key: request.GET[key].strip() for key in ("cron", "timezone", "after") if request.GET.get(key)}
    try:
        preview = call(request, "schedule.preview", **params)
        return JsonResponse(preview | {"labels": [time_label(time) for time in preview["times"]]})
    except CocoonError as error:
        return JsonResponse({"error": form_errors(error)}, status=error.http_status)


@page()
@require_POST
def schedule_action(request: HttpRequest, schedule_id: str, action: str) -> HttpResponse:
    result = call(request, method_of(SCHEDULE_ACTIONS, action), scheduleId=schedule_id)
    if action == "delete":
        return done(request, reverse("ui:schedules"), _("The schedule was deleted."))
    return done(
        request, reverse("ui:task", args=[result["id"]]), _("A run was started."), taskId=result["id"]
    )
