"""RPC methods of the engine objects another data directory left under this instance's name (admin):
listed, and adopted or removed on purpose (reconcile never removes them: their workspaces are someone's
work)."""

from typing import Any

from cocoon.registry import Call, registry
from cocoon.schema import EMPTY, array, obj
from sandboxes import reconcile
from sandboxes.schemas import (
    FOREIGN_SANDBOX,
    SANDBOX,
    SANDBOX_ID,
    SANDBOX_NAME,
    serialize_foreign_sandbox,
    serialize_sandbox,
)


@registry.method(
    "engine.foreign",
    reads=True,
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


@registry.method(
    "engine.adopt",
    description=(
        "Make a sandbox another data directory left this one's, workspace and all: it is listed and "
        "works like any other from then on (its old agents are not adopted)."
    ),
    params=obj({"sandboxId": SANDBOX_ID, "name": SANDBOX_NAME}, required=("sandboxId",)),
    result=SANDBOX,
    admin=True,
)
def engine_adopt(call: Call) -> dict[str, Any]:
    adopted = reconcile.adopt_foreign(
        call.params["sandboxId"], name=call.params.get("name"), actor=call.actor
    )
    return serialize_sandbox(adopted)
