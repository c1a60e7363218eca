"""Pages of the web UI: login, dashboard, sandboxes (files, diff, git), agents (terminal), activity
(tasks and schedules: ui.task_views).

Every read and every change goes through the method registry (ui.web.call), as the API's would.
"""

import base64
from typing import Any

from django.contrib.auth import authenticate
from django.contrib.auth import login as django_login
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.dateparse import parse_datetime
from django.utils.functional import Promise
from django.utils.http import content_disposition_header
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from agents.choices import AgentStatus
from attention.feed import ended_unexpectedly
from cocoon.actors import Actor
from cocoon.auth import log_in_session, log_out
from cocoon.errors import NotFound, RateLimited
from cocoon.setup import CHECKS
from cocoon.throttle import guarded, refuse_if_locked_out
from sandboxes.choices import Capability, NetworkMode
from scheduling.choices import TaskStatus
from ui.diff import diff_context
from ui.usage_views import BudgetForm, budget_section, money, set_budget
from ui.web import actor_of, back, call, done, form_number, method_of, page, profiles, show, ui_language
from usage.choices import Scope

# -- login ---------------------------------------------------------------------------------------------


def _log_in(request: HttpRequest) -> Actor | None:
    """The actor the posted token or user name and password stand for; raises rate_limited while this
    client is locked out for too many wrong ones."""
    address = request.META.get("REMOTE_ADDR", "")
    token = request.POST.get("token", "").strip()
    username = request.POST.get("username", "").strip()
    if token:
        return guarded(address, lambda: log_in_session(request.session, token_plain=token))
    if not username:
        return None
    # The password backend counts a wrong password too, but can only say "no"; a 429 is said here.
    refuse_if_locked_out(address)
    user = authenticate(request, username=username, password=request.POST.get("password", ""))
    if user is None:
        return None
    django_login(request, user)  # the Django admin accepts the same session
    return log_in_session(request.session, user=user)


def login(request: HttpRequest) -> HttpResponse:
    """Log in with a token, or with a Django user's name and password."""
    with translation.override(ui_language(request)):
        error: str | Promise = ""
        status, headers = 200, {}
        if request.method == "POST":
            try:
                if _log_in(request) is not None:
                    return redirect(back(request, reverse("ui:dashboard")))
                error, status = _("That token or user name and password is not valid."), 401
            except RateLimited as refused:
                error, status, headers = (
                    refused.render()["message"],
                    refused.http_status,
                    refused.http_headers,
                )
        context = {"error": error, "next": request.GET.get("next") or request.POST.get("next", "")}
        response = render(request, "ui/login.html", context, status=status)
        for name, value in headers.items():
            response[name] = value
        return response


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    log_out(request)
    return redirect("ui:login")


# -- dashboard -----------------------------------------------------------------------------------------


FLEET_PAGE_SIZE = 48
# The wall's order: what waits for a person first, then what ended badly, what runs, what ended well.
FLEET_RANKS = {
    AgentStatus.BLOCKED: 0,
    AgentStatus.DONE: 1,
    AgentStatus.WORKING: 3,
    AgentStatus.IDLE: 4,
    AgentStatus.UNKNOWN: 5,
    AgentStatus.EXITED: 6,
}
FAILED_EXIT_RANK = 2
ATTENTION_ACTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "ack": ("attention.ack", {}),
    "snooze": ("attention.snooze", {"minutes": 60}),
}


def fleet_order(agent: dict[str, Any]) -> tuple[int, str, str]:
    """Its place on the wall: by rank, then the longest in its status first."""
    rank = FAILED_EXIT_RANK if ended_unexpectedly(agent) else FLEET_RANKS[agent["status"]]
    return rank, agent["statusSince"], agent["id"]


def _fleet(request: HttpRequest, sandbox_names: dict[str, str]) -> dict[str, Any]:
    """One page of the wall of agent cards, each with its sandbox's name, the task it works for, how
    long it has been in its status and what its LLM requests cost."""
    agents = sorted(call(request, "agent.list"), key=fleet_order)
    wall = Paginator(agents, FLEET_PAGE_SIZE).get_page(request.GET.get("page"))
    tasks = call(request, "task.list", status=[TaskStatus.RUNNING, TaskStatus.REVIEW], limit=1000)
    task_of = {agent_id: task for task in reversed(tasks) for agent_id in task["agentIds"]}  # newest wins
    usage = call(request, "usage.summary", groupBy="agent")
    cost_of = {group["key"]: group["cost"] for group in usage["groups"]}
    cards = [
        agent
        | {
            "sandboxName": sandbox_names.get(agent["sandboxId"]),
            "task": task_of.get(agent["id"]),
            "since": parse_datetime(agent["statusSince"]),
            "spend": money(cost, usage["currency"]) if (cost := cost_of.get(agent["id"], 0)) > 0 else "",
        }
        for agent in wall
    ]
    return {"wall": wall, "agents": cards}


@page()
def dashboard(request: HttpRequest) -> HttpResponse:
    """What needs a person (the open attention items), the wall of agents, the sandboxes."""
    sandboxes = call(request, "sandbox.list")
    items = call(request, "attention.list")
    needs_you = [item | {"opened": parse_datetime(item["openedAt"])} for item in items]
    context = {
        "setup": call(request, "system.setup_status"),
        "needs_you": needs_you,
        "sandboxes": sandboxes,
        "pool": call(request, "system.info")["pool"],
    }
    context |= _fleet(request, {sandbox["id"]: sandbox["name"] for sandbox in sandboxes})
    return show(request, "ui/dashboard.html", context)


@page()
@require_POST
def attention_action(request: HttpRequest, item_id: str, action: str) -> HttpResponse:
    """Ack an item of "Needs you", or snooze it for an hour."""
    method, params = method_of(ATTENTION_ACTIONS, action)
    call(request, method, itemId=item_id, **params)
    return done(request, reverse("ui:dashboard"), _("Done"))


@page(admin=True)
@require_POST
def setup_fix(request: HttpRequest) -> HttpResponse:
    """Run a checklist item's fix method (build image, install toolbox, start proxy, ...)."""
    fixes = {check.key: check.fix for check in CHECKS}
    call(request, fixes.get(request.POST.get("key", "")) or "")
    return done(request, reverse("ui:dashboard"), _("Started; the checklist updates when it is done."))


# -- sandboxes ---------------------------------------------------------------------------------------


def _create_options(request: HttpRequest) -> dict[str, Any]:
    """What the create form may offer on this driver, and why the rest is missing."""
    info = call(request, "system.info")
    capabilities = set(info["capabilities"])
    images = []
    if Capability.IMAGES in capabilities and actor_of(request).is_admin:
        images = call(request, "image.status")
    return {
        "info": info,
        "networks": NetworkMode.values,
        "images": images,
        "has_images": Capability.IMAGES in capabilities,
        "has_limits": Capability.RESOURCE_LIMITS in capabilities,
        "egress_enforced": Capability.EGRESS_ENFORCED in capabilities,
        "defaults": call(request, "settings.get")["sandbox"] if actor_of(request).is_admin else None,
    }


@page()
def sandboxes(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _create_sandbox(request)
    context = {"sandboxes": call(request, "sandbox.list")} | _create_options(request)
    return show(request, "ui/sandboxes.html", context)


def _create_sandbox(request: HttpRequest) -> HttpResponse:
    form = request.POST
    params: dict[str, Any] = {
        key: form[key].strip()
        for key in ("name", "image", "repo", "branch", "network", "runtime")
        if form.get(key)
    }
    limits = {key: form_number(form[key]) for key in ("cpus", "memoryMb", "pids") if form.get(key)}
    if limits:
        params["limits"] = limits
    sandbox = call(request, "sandbox.create", **params)
    return redirect("ui:sandbox", sandbox_id=sandbox["id"])


@page()
def sandbox(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    return _sandbox_page(request, sandbox_id)


def _sandbox_page(request: HttpRequest, sandbox_id: str, posted: BudgetForm | None = None) -> HttpResponse:
    current = call(request, "sandbox.get", sandboxId=sandbox_id)
    context = {
        "sandbox": current,
        "node_name": _node_name(request, current["node"]),
        "agents": call(request, "agent.list", sandboxId=sandbox_id),
        "budget": budget_section(request, Scope.SANDBOX, sandbox_id, current["budget"], posted),
    } | _spawn_options(request)
    return show(request, "ui/sandbox.html", context, status=400 if posted else 200)


def _node_name(request: HttpRequest, node_id: str) -> str | None:
    """The name of the node a sandbox runs on, for an admin (node.get is an admin's method: others see
    the node's id)."""
    if not actor_of(request).is_admin:
        return None
    try:
        return call(request, "node.get", nodeId=node_id)["name"]
    except NotFound:  # gone meanwhile
        return None


@page(admin=True)
@require_POST
def sandbox_budget(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    return set_budget(request, Scope.SANDBOX, sandbox_id, _sandbox_page)


SANDBOX_ACTIONS = {"start": "sandbox.start", "stop": "sandbox.stop", "delete": "sandbox.delete"}


@page()
@require_POST
def sandbox_action(request: HttpRequest, sandbox_id: str, action: str) -> HttpResponse:
    call(request, method_of(SANDBOX_ACTIONS, action), sandboxId=sandbox_id)
    if action == "delete":
        return done(request, reverse("ui:sandboxes"), _("The sandbox was deleted."))
    return done(request, reverse("ui:sandbox", args=[sandbox_id]))


# -- files ---------------------------------------------------------------------------------------------


def _parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0] or "/"


@page()
def files(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    """A folder's entries, or a file to view and edit (?file=), or a download (?download=)."""
    path = request.GET.get("path") or "/workspace"
    if download := request.GET.get("download"):
        content = call(request, "files.read", sandboxId=sandbox_id, path=download, encoding="base64")
        response = HttpResponse(base64.b64decode(content["content"]), content_type="application/octet-stream")
        response["Content-Disposition"] = content_disposition_header(True, download.rsplit("/", 1)[-1])
        return response
    context: dict[str, Any] = {"sandbox": call(request, "sandbox.get", sandboxId=sandbox_id), "path": path}
    if file := request.GET.get("file"):
        context |= {"file": file, "content": call(request, "files.read", sandboxId=sandbox_id, path=file)}
        context["path"] = _parent(file)
    entries = call(request, "files.list", sandboxId=sandbox_id, path=context["path"])["entries"]
    context["entries"] = sorted(entries, key=lambda entry: (entry["type"] != "directory", entry["name"]))
    context["parent"] = _parent(context["path"])
    return show(request, "ui/files.html", context)


@page()
@require_POST
def files_write(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    """Save an edited file, or upload one (multipart) into the folder being shown."""
    folder = request.POST.get("path") or "/workspace"
    if upload := request.FILES.get("upload"):
        path = f"{folder.rstrip('/')}/{upload.name}"
        content, encoding = base64.b64encode(upload.read()).decode(), "base64"
    else:
        path, content, encoding = request.POST["file"], request.POST.get("content", ""), "utf-8"
        content = content.replace("\r\n", "\n")  # browsers send form text with CRLF line ends
    call(request, "files.write", sandboxId=sandbox_id, path=path, content=content, encoding=encoding)
    target = reverse("ui:files", args=[sandbox_id])
    return done(request, f"{target}?file={path}", _("Saved %(path)s.") % {"path": path})


# -- diff and git ------------------------------------------------------------------------------------


@page()
def diff(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    result = call(request, "sandbox.diff", sandboxId=sandbox_id)
    context = {
        "sandbox": call(request, "sandbox.get", sandboxId=sandbox_id),
        "patch": result["patch"],
        **diff_context(result, request.GET.get("view")),
    }
    return show(request, "ui/diff.html", context)


GIT_ACTIONS = {
    "apply_patch": ("sandbox.apply_patch", ("patch",), ("threeWay",)),
    "commit": ("git.commit", ("message",), ()),
    "push": ("git.push", ("branch",), ()),
    "create_pr": ("git.create_pr", ("title", "body", "base", "head"), ()),
}


@page()
@require_POST
def git_action(request: HttpRequest, sandbox_id: str, action: str) -> HttpResponse:
    method, fields, flags = method_of(GIT_ACTIONS, action)
    params = {name: request.POST[name] for name in fields if request.POST.get(name)}
    params |= {flag: True for flag in flags if request.POST.get(flag)}
    result = call(request, method, sandboxId=sandbox_id, **params)
    messages = {
        "apply_patch": _("Patch applied.") if result.get("applied") else _("The patch does not apply."),
        "commit": _("Committed %(commit)s.") % {"commit": result.get("commit", "")[:12]},
        "push": _("Pushed."),
        "create_pr": _("Pull request %(url)s opened.") % {"url": result.get("url", "")},
    }
    return done(request, reverse("ui:diff", args=[sandbox_id]), messages.get(action), **result)


# -- agents --------------------------------------------------------------------------------------------


def _spawn_options(request: HttpRequest) -> dict[str, Any]:
    """The spawn form: profiles, and (for admins, who may list them) the providers with a secret."""
    providers = []
    if actor_of(request).is_admin:
        providers = [provider["id"] for provider in call(request, "providers.list") if provider["secretSet"]]
    return {"profiles": [profile["name"] for profile in profiles(request)], "providers": providers}


@page()
def agents(request: HttpRequest) -> HttpResponse:
    context = {
        "agents": call(request, "agent.list"),
        "running": [sb for sb in call(request, "sandbox.list") if sb["state"] == "running"],
    } | _spawn_options(request)
    return show(request, "ui/agents.html", context)


@page()
@require_POST
def agent_spawn(request: HttpRequest) -> HttpResponse:
    form = request.POST
    params: dict[str, Any] = {"sandboxId": form.get("sandboxId", ""), "profile": form.get("profile", "")}
    if prompt := form.get("prompt", "").strip():
        params["prompt"] = prompt
    if providers := form.getlist("providers"):
        params["providers"] = providers
    if model := form.get("model", "").strip():
        params["model"] = model
    agent = call(request, "agent.spawn", **params)
    return redirect("ui:agent", agent_id=agent["id"])


@page()
def agent(request: HttpRequest, agent_id: str) -> HttpResponse:
    return _agent_page(request, agent_id)


def _agent_page(request: HttpRequest, agent_id: str, posted: BudgetForm | None = None) -> HttpResponse:
    current = call(request, "agent.get", agentId=agent_id)
    context = {
        "agent": current,
        "sandbox": call(request, "sandbox.get", sandboxId=current["sandboxId"]),
        "read_only": request.GET.get("mode") == "ro",
        "keys": ["Escape", "C-c", "y", "n", "Enter", "Tab", "Up", "Down"],
        "budget": budget_section(request, Scope.AGENT, agent_id, current["budget"], posted),
    }
    return show(request, "ui/agent.html", context, status=400 if posted else 200)


@page(admin=True)
@require_POST
def agent_budget(request: HttpRequest, agent_id: str) -> HttpResponse:
    return set_budget(request, Scope.AGENT, agent_id, _agent_page)


AGENT_ACTIONS = {"input": "agent.send_input", "keys": "agent.send_keys", "kill": "agent.kill"}


@page()
@require_POST
def agent_action(request: HttpRequest, agent_id: str, action: str) -> HttpResponse:
    params: dict[str, dict[str, Any]] = {
        "input": {"text": request.POST.get("text", "")},
        "keys": {"keys": request.POST.getlist("key")},
        "kill": {},
    }
    method = method_of(AGENT_ACTIONS, action)
    call(request, method, agentId=agent_id, **params[action])
    return done(request, reverse("ui:agent", args=[agent_id]), _("Done"))


# -- activity ------------------------------------------------------------------------------


@page()
def activity(request: HttpRequest) -> HttpResponse:
    filters = {
        key: request.GET[key].strip() for key in ("sandboxId", "agentId") if request.GET.get(key, "").strip()
    }
    params: dict[str, Any] = dict(filters, limit=100)
    if (before := request.GET.get("before", "")).isdigit():
        params["before"] = int(before)
    entries = call(request, "activity.list", **params)
    context = {
        "entries": entries,
        "filters": filters,
        "older": entries[-1]["id"] if len(entries) == 100 else None,
    }
    return show(request, "ui/activity.html", context)
