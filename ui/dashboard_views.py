"""The dashboard: the setup checklist, what needs a person (attention items, acked or snoozed here), the
wall of agents and the sandboxes."""

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from agents.choices import AgentStatus
from attention.feed import ended_unexpectedly
from cocoon.setup import CHECKS
from scheduling.choices import TaskStatus
from ui.usage_views import money
from ui.web import call, done, method_of, page, show

FLEET_PAGE_SIZE = 48
# The wall's order: what waits for a person first, then what ended badly, what runs, what ended well.
FLEET_RANKS = {
    AgentStatus.BLOCKED: 0,
    AgentStatus.ERROR: 1,  # its turn failed: it needs a person as much as a question does
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
