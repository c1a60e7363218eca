"""Settings > Nodes (admin only): the engines sandboxes run on, what they hold; add one (its URL and TLS
files, as node.add takes them), drain, undrain and remove."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from cocoon.errors import CocoonError
from sandboxes.models import LOCAL_NODE
from ui.web import call, done, form_errors, method_of, page, show

# A node's room as the table shows it, one column each: its used key, its capacity key, the title.
ROOM = (
    ("sandboxes", "maxSandboxes", _("Sandboxes")),
    ("cpus", "cpus", _("CPUs")),
    ("memoryMb", "memoryMb", _("Memory (MB)")),
)
# The action word of a node's URL: the method, its parameters, and the message when it is done.
NODE_ACTIONS = {
    "drain": ("node.drain", {}, _("Node %(name)s is draining: no new sandboxes go there.")),
    "undrain": ("node.drain", {"undrain": True}, _("Node %(name)s takes new sandboxes again.")),
    "remove": ("node.remove", {}, _("Node %(name)s was removed.")),
}


def _row(node: dict[str, Any]) -> dict[str, Any]:
    """A node for the table: its room as (used, capacity) pairs, None for a capacity not known yet, its
    labels as pairs (a label named "items" would hide a dict's items from the template), and its engine's
    version (the local node's facts name only its driver)."""
    room = [(node["used"][used], node["capacity"].get(capacity)) for used, capacity, _title in ROOM]
    facts = node["facts"]
    return node | {
        "room": room,
        "label_pairs": sorted(node["labels"].items()),
        "version": facts.get("version") or facts.get("driver") or "",
        "local": node["id"] == LOCAL_NODE,
    }


def _proxies(status: dict[str, Any]) -> dict[str, str]:
    """Each node's egress proxy in a word, by node id: the local one's and those of the remote nodes in
    use (a node without one has none to show)."""
    words = {}
    for node_id, proxy in [(LOCAL_NODE, status), *((node["nodeId"], node) for node in status["nodes"])]:
        if node_id == LOCAL_NODE and not status["enforced"]:
            continue
        if not proxy["running"]:
            words[node_id] = str(_("down"))
        elif proxy["policyError"]:
            words[node_id] = str(_("policy refused"))
        elif proxy["acknowledgedVersion"] is not None and proxy["acknowledgedVersion"] >= (
            proxy["policyVersion"] or 0
        ):
            words[node_id] = str(_("running"))
        else:
            words[node_id] = str(_("policy not loaded yet"))
    return words


@page(admin=True)
def nodes(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _add_node(request)
    return show(request, "ui/settings/nodes.html", _nodes_context(request))


def _nodes_context(request: HttpRequest) -> dict[str, Any]:
    try:
        proxies = _proxies(call(request, "egress.status"))
    except CocoonError:  # the local engine does not answer: the nodes are still worth a look
        proxies = {}
    return {
        "section": "nodes",
        "nodes": [_row(node) | {"proxy": proxies.get(node["id"], "")} for node in call(request, "node.list")],
        "room_titles": [title for _used, _capacity, title in ROOM],
    }


PEM_MAX = 20_000  # node.add's bound of each PEM
TLS_FILES = ("ca", "cert", "key")


def _add_node(request: HttpRequest) -> HttpResponse:
    """Take a node in from the form: its name, URL and labels, and its TLS files (CA, cocoon's client
    certificate and key); refused, the form comes back as sent (but the files) with each error at its
    field."""
    form = request.POST
    params: dict[str, Any] = {"name": form.get("name", "").strip(), "url": form.get("url", "").strip()}
    lines = (line.partition("=") for line in form.get("labels", "").splitlines() if line.strip())
    if labels := {key.strip(): value.strip() for key, _sep, value in lines}:
        params["labels"] = labels
    tls = {part: _pem(request, part) for part in TLS_FILES}
    if any(tls.values()):
        params["tls"] = tls  # all three or node.add's field error names what is missing
    try:
        node = call(request, "node.add", **params)
    except CocoonError as error:
        context = _nodes_context(request) | {"posted": form, "errors": form_errors(error)}
        return show(request, "ui/settings/nodes.html", context, status=400)
    return done(request, reverse("ui:nodes"), _("Node %(name)s was taken in.") % {"name": node["name"]})


def _pem(request: HttpRequest, part: str) -> str:
    """An uploaded TLS file's text (bounded: what is longer is cut, and node.add refuses it)."""
    upload = request.FILES.get(part)
    return upload.read(PEM_MAX + 1).decode("utf-8", "replace") if upload else ""


@page(admin=True)
@require_POST
def node_action(request: HttpRequest, node_id: str, action: str) -> HttpResponse:
    """Drain, undrain or remove a node. One that still holds sandboxes stays: the method's Conflict is the
    page's message."""
    method, params, message = method_of(NODE_ACTIONS, action)
    name = call(request, "node.get", nodeId=node_id)["name"]  # node.remove answers nothing to name it by
    call(request, method, nodeId=node_id, **params)
    return done(request, reverse("ui:nodes"), message % {"name": name})
