"""RPC methods of nodes (admin): the engines sandboxes run on, and where new ones may go."""

from typing import Any

from cocoon.registry import Call, registry
from cocoon.schema import BOOLEAN, EMPTY, array, integer, obj, string
from cocoon.settings_schema import NODE_NAME_PATTERN
from sandboxes import node_services, nodes
from sandboxes.capacity import NOTHING_USED, used_by_node
from sandboxes.schemas import NODE, NODE_LABELS, serialize_node

NODE_ID = string(pattern="^nd_[a-z0-9]{1,37}$")
PEM = string(minLength=1, maxLength=20_000)
CAPACITY = obj(
    {
        "cpus": {"type": "number", "exclusiveMinimum": 0, "maximum": 100_000},
        "memoryMb": integer(minimum=1, maximum=10**9),
        "maxSandboxes": integer(minimum=0, maximum=100_000),
    }
)
BY_ID = obj({"nodeId": NODE_ID}, required=("nodeId",))


@registry.method(
    "node.list",
    reads=True,
    description="The nodes sandboxes run on, the local one first.",
    result=array(NODE),
    admin=True,
)
def node_list(call: Call) -> list[dict[str, Any]]:
    used = used_by_node()
    return [serialize_node(node, used.get(node.id, NOTHING_USED)) for node in nodes.list_nodes()]


@registry.method("node.get", reads=True, description="One node.", params=BY_ID, result=NODE, admin=True)
def node_get(call: Call) -> dict[str, Any]:
    return serialize_node(nodes.get_node(call.params["nodeId"]))


@registry.method(
    "node.add",
    description="Take in a Docker engine on another host: tcp://host:port with mutual TLS (tls: the CA its "
    "certificate comes from, pinned; cocoon's client certificate and key, which goes to the vault). The "
    "engine must answer (its version, runtimes and live-restore are read) and be no node yet; nothing is "
    "kept when it does not. New sandboxes may go there at once, in every network mode (the node gets an "
    "egress proxy of its own); the toolbox follows in the background.",
    params=obj(
        {
            "name": string(pattern=NODE_NAME_PATTERN),
            "url": string(minLength=1, maxLength=300),
            "tls": obj({"ca": PEM, "cert": PEM, "key": PEM}, required=("ca", "cert", "key")),
            "labels": NODE_LABELS,
            "capacity": CAPACITY,
        },
        required=("name", "url"),
    ),
    result=NODE,
    admin=True,
)
def node_add(call: Call) -> dict[str, Any]:
    params = call.params
    tls = params.get("tls")
    node = node_services.add_node(
        actor=call.actor,
        name=params["name"],
        url=params["url"],
        tls=node_services.Tls(tls["ca"], tls["cert"], tls["key"]) if tls else None,
        labels=params.get("labels", {}),
        overrides=params.get("capacity", {}),
    )
    return serialize_node(node)


@registry.method(
    "node.update",
    description="Change a node's labels or its capacity (what is given replaces what was read from the "
    "engine).",
    params=obj({"nodeId": NODE_ID, "labels": NODE_LABELS, "capacity": CAPACITY}, required=("nodeId",)),
    result=NODE,
    admin=True,
)
def node_update(call: Call) -> dict[str, Any]:
    params = call.params
    node = node_services.update_node(
        params["nodeId"], actor=call.actor, labels=params.get("labels"), overrides=params.get("capacity")
    )
    return serialize_node(node)


@registry.method(
    "node.drain",
    description="No new sandboxes on the node (undrain: ready again); with stop, its sandboxes are stopped "
    "too. Sandboxes there keep running otherwise.",
    params=obj({"nodeId": NODE_ID, "stop": BOOLEAN, "undrain": BOOLEAN}, required=("nodeId",)),
    result=NODE,
    admin=True,
)
def node_drain(call: Call) -> dict[str, Any]:
    params = call.params
    node = node_services.drain_node(
        params["nodeId"],
        actor=call.actor,
        undrain=params.get("undrain", False),
        stop=params.get("stop", False),
    )
    return serialize_node(node)


@registry.method(
    "node.remove",
    description="Forget a node that holds no sandboxes (drained first; its client key leaves the vault; "
    "every object of this instance on its engine, its egress proxy, networks, the toolbox volume and what "
    "is left of sandboxes, is removed if its last check answered). The local node stays.",
    params=BY_ID,
    result=EMPTY,
    admin=True,
)
def node_remove(call: Call) -> dict[str, Any]:
    node_services.remove_node(call.params["nodeId"], actor=call.actor)
    return {}
