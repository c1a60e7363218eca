"""Where a new sandbox goes: a small, pure function over what each node offers and already holds.

A node can take a sandbox when it is ready, has every label asked for, offers the runtime and network
mode, and still has room for its CPUs, memory and one more sandbox within its capacity. Of those,
"spread" picks the one with the largest share of room left once the sandbox is on it (work spreads
evenly over unlike nodes), "pack" the one with the least (nodes fill one after another, the others
stay free for large sandboxes or can be drained). Ties go to the node named first by name.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Room:
    cpus: float
    memory_mb: int
    sandboxes: int


@dataclass(frozen=True)
class Candidate:
    """A node as placement sees it."""

    id: str
    name: str
    ready: bool
    labels: dict[str, str]
    runtimes: frozenset[str]
    networks: frozenset[str]  # the network modes it can give a sandbox
    capacity: Room
    used: Room


@dataclass(frozen=True)
class Demand:
    cpus: float
    memory_mb: int
    network: str
    runtime: str = ""  # "" : the engine's default
    labels: dict[str, str] = field(default_factory=dict)


def fits(node: Candidate, demand: Demand) -> bool:
    return (
        node.ready
        and all(node.labels.get(key) == value for key, value in demand.labels.items())
        and (not demand.runtime or demand.runtime in node.runtimes)
        and demand.network in node.networks
        and node.used.cpus + demand.cpus <= node.capacity.cpus
        and node.used.memory_mb + demand.memory_mb <= node.capacity.memory_mb
        and node.used.sandboxes + 1 <= node.capacity.sandboxes
    )


def room_left(node: Candidate, demand: Demand) -> float:
    """The scarcest share of the node's capacity left once the sandbox is on it (0..1)."""
    capacity, used = node.capacity, node.used
    return min(
        (capacity.cpus - used.cpus - demand.cpus) / capacity.cpus,
        (capacity.memory_mb - used.memory_mb - demand.memory_mb) / capacity.memory_mb,
        (capacity.sandboxes - used.sandboxes - 1) / capacity.sandboxes,
    )


def place(nodes: Iterable[Candidate], demand: Demand, strategy: str = "spread") -> Candidate | None:
    """The node for the demand, or None when no node can take it."""
    fitting = sorted((node for node in nodes if fits(node, demand)), key=lambda node: node.name)
    if not fitting:
        return None
    if strategy == "pack":
        return min(fitting, key=lambda node: room_left(node, demand))
    return max(fitting, key=lambda node: room_left(node, demand))
