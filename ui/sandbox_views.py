"""Sandboxes: the list and the create form, one sandbox's page (its agents, its budget) and its actions.
Its workspace (files, diff, git): ui.workspace_views."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from cocoon.errors import CocoonError, NotFound
from sandboxes.choices import OPTIONAL_RUNTIMES, Capability, NetworkMode
from ui.agent_views import cards, spawn_options
from ui.filters import filtered
from ui.usage_views import BudgetForm, budget_section, set_budget
from ui.web import actor_of, call, done, form_errors, form_number, method_of, page, show
from usage.choices import Scope

# The least a limit may be (sandboxes.schemas.LIMITS), as the form's fields offer it.
LIMIT_MINIMA = {"cpus": 0.5, "memoryMb": 64, "pids": 16}


def _create_options(request: HttpRequest) -> dict[str, Any]:
    """What the create form may offer on this driver and to this actor, and why the rest cannot work:
    images not built, runtimes not installed, network modes above the token's ceilings (each shown
    disabled with its reason); each limit's range."""
    info = call(request, "system.info")
    capabilities = set(info["capabilities"])
    ceilings = actor_of(request).ceilings
    images = []
    if Capability.IMAGES in capabilities and actor_of(request).is_admin:
        images = call(request, "image.status")
    maxima = {"cpus": ceilings.cpus, "memoryMb": ceilings.memory_mb, "pids": None}
    return {
        "info": info,
        "networks": [
            (mode, ceilings.networks is None or mode in ceilings.networks) for mode in NetworkMode.values
        ],
        "runtimes": [(runtime, runtime in info["runtimes"]) for runtime in OPTIONAL_RUNTIMES],
        "ranges": {key: {"min": LIMIT_MINIMA[key], "max": maxima[key]} for key in LIMIT_MINIMA},
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
    return show(request, "ui/sandboxes.html", _listed(request) | _create_options(request))


def _listed(request: HttpRequest) -> dict[str, Any]:
    shown, listing = filtered(
        request, call(request, "sandbox.list"), search=("name", "id", "repo", "image"), by=("state", "node")
    )
    return {"sandboxes": shown, "listing": listing}


def _create_sandbox(request: HttpRequest) -> HttpResponse:
    """Create, or show the form again as it was sent with each error at its field."""
    form = request.POST
    params: dict[str, Any] = {
        key: form[key].strip()
        for key in ("name", "image", "repo", "branch", "network", "runtime")
        if form.get(key)
    }
    limits = {key: form_number(form[key]) for key in LIMIT_MINIMA if form.get(key)}
    if limits:
        params["limits"] = limits
    try:
        sandbox = call(request, "sandbox.create", **params)
    except CocoonError as error:
        context = _listed(request) | _create_options(request) | {"posted": form, "errors": form_errors(error)}
        return show(request, "ui/sandboxes.html", context, status=400)
    return redirect("ui:sandbox", sandbox_id=sandbox["id"])


@page()
def sandbox(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    return _sandbox_page(request, sandbox_id)


def _sandbox_page(request: HttpRequest, sandbox_id: str, posted: BudgetForm | None = None) -> HttpResponse:
    current = call(request, "sandbox.get", sandboxId=sandbox_id)
    context = {
        "sandbox": current,
        "node_name": _node_name(request, current["node"]),
        **cards(request, call(request, "agent.list", sandboxId=sandbox_id), {current["id"]: current["name"]}),
        "budget": budget_section(request, Scope.SANDBOX, sandbox_id, current["budget"], posted),
    } | spawn_options(request)
    return show(request, "ui/sandbox.html", context, status=400 if posted else 200)


def _node_name(request: HttpRequest, node_id: str) -> str | None:
    """The name of the node a sandbox runs on, for an admin (node.get is an admin's method: others see
    the node's id)."""
    if not actor_of(request).is_admin:
        return None
    try:
        node: dict[str, Any] = call(request, "node.get", nodeId=node_id)
    except NotFound:  # gone meanwhile
        return None
    return str(node["name"])


@page(admin=True)
@require_POST
def sandbox_budget(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    return set_budget(request, Scope.SANDBOX, sandbox_id, _sandbox_page)


SANDBOX_ACTIONS = {
    "start": "sandbox.start",
    "stop": "sandbox.stop",
    "delete": "sandbox.delete",
    "rename": "sandbox.rename",
}


@page()
@require_POST
def sandbox_action(request: HttpRequest, sandbox_id: str, action: str) -> HttpResponse:
    params = {"name": request.POST.get("name", "").strip()} if action == "rename" else {}
    call(request, method_of(SANDBOX_ACTIONS, action), sandboxId=sandbox_id, **params)
    if action == "rename":
        return done(request, reverse("ui:sandbox", args=[sandbox_id]), _("Renamed."))
    if action == "delete":
        return done(request, reverse("ui:sandboxes"), _("The sandbox was deleted."))
    return done(request, reverse("ui:sandbox", args=[sandbox_id]))
