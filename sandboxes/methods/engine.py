"""RPC methods of the engine objects another data directory left under this instance's name (admin):
listed, and removed on purpose (reconcile never removes them: their workspaces are someone's work)."""

from typing import Any

from cocoon.registry import Call, registry
from cocoon.schema import EMPTY, array, obj
from sandboxes import reconcile
from sandboxes.schemas import FOREIGN_SANDBOX, SANDBOX_ID, serialize_foreign_sandbox


@registry.method(
    "engine.foreign",
    description="Sandboxes another data directory left on the engines under this instance's name.",
    result=array(FOREIGN_SANDBOX),
    admin=True,
)
def engine_foreign(call: Call) -> list[dict[str, Any]]:
    return [serialize_foreign_sandbox(left) for left in reconcile.foreign_sandboxes()]


@registry.method(
    "engine.remove",
    description="Remove what another data directory left of a sandbox: its container, workspace and network.",
    params=obj({"sandboxId": SANDBOX_ID}, required=("sandboxId",)),
    result=EMPTY,
    admin=True,
)
def engine_remove(call: Call) -> dict[str, Any]:
    reconcile.remove_foreign(call.params["sandboxId"], actor=call.actor)
    return {}
