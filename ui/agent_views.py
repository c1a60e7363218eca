"""Agents: the list and the spawn form, one agent's page (its terminal, its budget) and its actions."""

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from agents.choices import AgentStatus
from attention.answers import REPLY_MAX
from scheduling.choices import TaskStatus
from ui.filters import filtered
from ui.usage_views import BudgetForm, budget_section, money, set_budget
from ui.web import actor_of, call, done, method_of, missing_keys, page, profiles, show
from usage.choices import Scope


def cards(
    request: HttpRequest, agents: list[dict[str, Any]], sandbox_names: dict[str, str] | None = None
) -> dict[str, Any]:
    """Agent cards: each with its sandbox's name, the task it works for, how long it has been in its
    status, what its LLM requests cost and, when it is blocked, the answers of its profile to send."""
    if sandbox_names is None:
        sandbox_names = {sandbox["id"]: sandbox["name"] for sandbox in call(request, "sandbox.list")}
    tasks = call(request, "task.list", status=[TaskStatus.RUNNING, TaskStatus.REVIEW], limit=1000)
    task_of = {agent_id: task for task in reversed(tasks) for agent_id in task["agentIds"]}  # newest wins
    usage = call(request, "usage.summary", groupBy="agent")
    cost_of = {group["key"]: group["cost"] for group in usage["groups"]}
    answers_of: dict[str, list[tuple[int, str]]] = {}
    if any(agent["status"] == AgentStatus.BLOCKED for agent in agents):
        answers_of = {
            profile["name"]: [(index, " ".join(keys)) for index, keys in enumerate(profile["answers"])]
            for profile in profiles(request)
        }
    shown = [
        agent
        | {
            "sandboxName": sandbox_names.get(agent["sandboxId"]),
            "task": task_of.get(agent["id"]),
            "since": parse_datetime(agent["statusSince"]),
            "spend": money(cost, usage["currency"]) if (cost := cost_of.get(agent["id"], 0)) > 0 else "",
            "answers": answers_of.get(agent["profile"], []),
        }
        for agent in agents
    ]
    return {"agents": shown, "reply_max": REPLY_MAX}


def spawn_options(request: HttpRequest) -> dict[str, Any]:
    """The spawn form: profiles, and (for admins, who may list them) the providers with a secret."""
    providers = []
    if actor_of(request).is_admin:
        providers = [provider["id"] for provider in call(request, "providers.list") if provider["secretSet"]]
    listed = profiles(request)
    return {
        "profiles": [profile["name"] for profile in listed],
        # Said before the click: the agent of such a profile could not log in, and the key to set.
        "without_provider": [profile["name"] for profile in listed if profile["providerMissing"]],
        "missing_keys": missing_keys(request, listed),
        "providers": providers,
    }


@page()
def agents(request: HttpRequest) -> HttpResponse:
    sandboxes = {sandbox["id"]: sandbox for sandbox in call(request, "sandbox.list")}
    listed = [
        agent
        | {
            "node": sandboxes[agent["sandboxId"]]["node"],
            "sandboxName": sandboxes[agent["sandboxId"]]["name"],
        }
        for agent in call(request, "agent.list")
        if agent["sandboxId"] in sandboxes
    ]
    shown, listing = filtered(
        request, listed, search=("name", "id", "sandboxName", "profile"), by=("status", "profile", "node")
    )
    context = {
        **cards(request, shown, {sandbox_id: sandbox["name"] for sandbox_id, sandbox in sandboxes.items()}),
        "listing": listing,
        "running": [sandbox for sandbox in sandboxes.values() if sandbox["state"] == "running"],
    } | spawn_options(request)
    return show(request, "ui/agents.html", context)


@page()
@require_POST
def agent_spawn(request: HttpRequest) -> HttpResponse:
    form = request.POST
    params: dict[str, Any] = {"sandboxId": form.get("sandboxId", ""), "profile": form.get("profile", "")}
    if name := form.get("name", "").strip():
        params["name"] = name
    if prompt := form.get("prompt", "").strip():
        params["prompt"] = prompt
    if providers := form.getlist("providers"):
        params["providers"] = providers
    if model := form.get("model", "").strip():
        params["model"] = model
    agent = call(request, "agent.spawn", **params)
    for warning in agent["warnings"]:
        messages.warning(request, warning)
    return redirect("ui:agent", agent_id=agent["id"])


@page()
def agent(request: HttpRequest, agent_id: str) -> HttpResponse:
    return _agent_page(request, agent_id)


@page()
def agent_card(request: HttpRequest, agent_id: str) -> HttpResponse:
    """One agent's card as it is now, for a page that shows it live (app.js: a new agent, or one whose
    card needs its answers)."""
    current = call(request, "agent.get", agentId=agent_id)
    sandbox = call(request, "sandbox.get", sandboxId=current["sandboxId"])
    context = cards(request, [current], {sandbox["id"]: sandbox["name"]})
    return render(request, "ui/_agent_card.html", context | {"agent": context["agents"][0]})


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


AGENT_ACTIONS = {
    "input": "agent.send_input",
    "keys": "agent.send_keys",
    "kill": "agent.kill",
    "rename": "agent.rename",
}


@page()
@require_POST
def agent_action(request: HttpRequest, agent_id: str, action: str) -> HttpResponse:
    params: dict[str, dict[str, Any]] = {
        "input": {"text": request.POST.get("text", "")},
        "keys": {"keys": request.POST.getlist("key")},
        "kill": {},
        "rename": {"name": request.POST.get("name", "").strip()},
    }
    method = method_of(AGENT_ACTIONS, action)
    call(request, method, agentId=agent_id, **params[action])
    return done(
        request, reverse("ui:agent", args=[agent_id]), _("Renamed.") if action == "rename" else _("Done")
    )
