"""The dashboard: the setup checklist, what needs a person (attention items, acked or snoozed here), the
wall of agents and the sandboxes."""

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from agents.choices import AgentStatus
from attention.feed import ended_unexpectedly
from cocoon.setup import CHECKS
from ui.agent_views import cards
from ui.web import call, done, method_of, missing_keys, page, show

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
    """One page of the wall of agent cards."""
    agents = sorted(call(request, "agent.list"), key=fleet_order)
    wall = Paginator(agents, FLEET_PAGE_SIZE).get_page(request.GET.get("page"))
    return {"wall": wall} | cards(request, list(wall), sandbox_names)


@page()
def dashboard(request: HttpRequest) -> HttpResponse:
    """What needs a person (the open attention items), the wall of agents, the sandboxes."""
    sandboxes = call(request, "sandbox.list")
    items = call(request, "attention.list")
    needs_you = [item | {"opened": parse_datetime(item["openedAt"])} for item in items]
    context = {
        "setup": call(request, "system.setup_status"),
        "missing_keys": missing_keys(request),
        "needs_you": needs_you,
        "sandboxes": sandboxes,
        "pool": call(request, "system.info")["pool"],
    }
    context |= _fleet(request, {sandbox["id"]: sandbox["name"] for sandbox in sandboxes})
    return show(request, "ui/dashboard.html", context)


@page()
def attention_item(request: HttpRequest, item_id: str) -> HttpResponse:
    """One item of "Needs you" as it is now, for the dashboard to add live (app.js); next: the page its
    forms go back to."""
    item = call(request, "attention.get", itemId=item_id)
    context = {"item": item | {"opened": parse_datetime(item["openedAt"])}, "next": request.GET.get("next")}
    return render(request, "ui/_attention_item.html", context)


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
