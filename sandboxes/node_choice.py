"""Which node a new sandbox goes to: the nodes as they are now (state, labels, runtimes, room) handed
to sandboxes.placement's pure choice, with the settings' strategy (spread or pack)."""

from dataclasses import replace

from django.utils.translation import gettext_lazy as _

from cocoon import config
from cocoon.errors import field_error, interpolate_lazy
from sandboxes import placement
from sandboxes.capacity import NOTHING_USED, capacity_of, used_by_node
from sandboxes.choices import NetworkMode
from sandboxes.drivers import get_driver
from sandboxes.models import LOCAL_NODE, Node
from sandboxes.nodes import LOCAL_NAME, list_nodes, several_nodes


def choose_node(demand: placement.Demand, node: str = "") -> str:
    """The node a new sandbox goes to: the one asked for (if it can take it), else the one placement
    picks among those that match (settings sandbox.placement: spread or pack). With no node but the
    local one, and none asked for, it is the local one: a single host places nothing."""
    if not node and not demand.labels and not several_nodes():
        return LOCAL_NODE
    if (picked := _place(demand, node)) is None:
        raise field_error(
            "node" if node else "nodeLabels" if demand.labels else "network",
            _("No node can take this sandbox now (its state, labels, runtimes, network modes or room)."),
            "no_node",
        )
    return picked.id


def choose_among(names: set[str], demand: placement.Demand, node: str = "") -> tuple[str, str] | None:
    """choose_node() among these nodes only (by name: those with a warm pool), as (id, name); None when
    none of them fits."""
    if not node and not demand.labels and not several_nodes():
        return (LOCAL_NODE, LOCAL_NAME) if LOCAL_NAME in names else None
    picked = _place(demand, node, names)
    return (picked.id, picked.name) if picked else None


def _place(demand: placement.Demand, node: str, among: set[str] | None = None) -> placement.Candidate | None:
    used = used_by_node()
    candidates = [_candidate(found, used.get(found.id, NOTHING_USED)) for found in list_nodes()]
    if node:
        candidates = [candidate for candidate in candidates if node in {candidate.id, candidate.name}]
        if not candidates:
            message = interpolate_lazy(_("Node %(id)s does not exist."), {"id": node})
            raise field_error("node", message, "not_found")
    if among is not None:  # a claim takes a member that is counted already: it needs no more room
        candidates = [
            replace(candidate, used=_less(candidate.used, demand))
            for candidate in candidates
            if candidate.name in among
        ]
    return placement.place(candidates, demand, config.get_settings()["sandbox"]["placement"])


def _less(used: placement.Room, demand: placement.Demand) -> placement.Room:
    return placement.Room(
        max(used.cpus - demand.cpus, 0.0),
        max(used.memory_mb - demand.memory_mb, 0),
        max(used.sandboxes - 1, 0),
    )


def _candidate(node: Node, used: placement.Room) -> placement.Candidate:
    capacity = capacity_of(node)
    local = node.id == LOCAL_NODE
    return placement.Candidate(
        id=node.id,
        name=node.name,
        ready=node.reachable and not node.draining,
        labels=node.labels,
        runtimes=frozenset(get_driver().runtimes() if local else node.facts.get("runtimes", ())),
        networks=frozenset(NetworkMode.values),
        capacity=placement.Room(
            float(capacity["cpus"]), int(capacity["memoryMb"]), int(capacity["maxSandboxes"])
        ),
        used=used,
    )
