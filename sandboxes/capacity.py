"""What a node can hold (its engine's CPUs and memory, overcommitted, then the admin's overrides) and
what the sandboxes on it hold by their limits: the room placement weighs."""

import os
from typing import Any

from django.db.models import Count, Q, Sum

from sandboxes import placement
from sandboxes.choices import SandboxState
from sandboxes.drivers.docker import remote
from sandboxes.models import LOCAL_NODE, Node, Sandbox

CHECK_TIMEOUT_S = 5  # a probe (a node's check, or taking one in) that gets no answer in this time has failed
# Capacity not given by the admin: the engine's CPUs and memory, overcommitted (a sandbox's limits are
# caps its agents mostly stay far below while they wait for their model), and a count.
CPU_OVERCOMMIT = 8
MEMORY_OVERCOMMIT = 2
MAX_SANDBOXES = 100
NOTHING_USED = placement.Room(0.0, 0, 0)


def probe(url: str, tls: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine's facts, and the capacity it offers before the admin's overrides."""
    facts = remote.probe(url, tls, CHECK_TIMEOUT_S)
    cpus, memory_mb = facts.pop("cpus"), facts.pop("memoryMb")
    capacity = {
        "cpus": cpus * CPU_OVERCOMMIT,
        "memoryMb": memory_mb * MEMORY_OVERCOMMIT,
        "maxSandboxes": MAX_SANDBOXES,
    }
    return facts, capacity


def used_by_node(*node_ids: str) -> dict[str, placement.Room]:
    """What the sandboxes on each node (of these, or all) hold by their limits, missing ones left out,
    stopped ones only their place (they hold no CPU or memory until started): one query for all nodes."""
    held = Sandbox.objects.exclude(state=SandboxState.MISSING)
    if node_ids:
        held = held.filter(node__in=node_ids)
    live = ~Q(state=SandboxState.STOPPED)
    rows = held.values("node").annotate(
        count=Count("id"), cpus=Sum("cpus", filter=live), memory=Sum("memory_mb", filter=live)
    )
    return {
        row["node"]: placement.Room(float(row["cpus"] or 0), int(row["memory"] or 0), row["count"])
        for row in rows
    }


def capacity_of(node: Node) -> dict[str, Any]:
    """What the node can hold: as probed (the local node: this machine's, cocoond runs next to its
    engine), then the admin's overrides."""
    probed = node.capacity
    if node.id == LOCAL_NODE:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        probed = {
            "cpus": (os.cpu_count() or 1) * CPU_OVERCOMMIT,
            "memoryMb": memory // 2**20 * MEMORY_OVERCOMMIT,
            "maxSandboxes": MAX_SANDBOXES,
        }
    return {**probed, **node.overrides}
