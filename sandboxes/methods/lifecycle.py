"""RPC methods of sandboxes: lifecycle, exec, images."""

from typing import Any

from django.db import transaction

from cocoon.registry import Call, registry
from cocoon.schema import BOOLEAN, EMPTY, ENV, STRING, array, enum, obj, string
from sandboxes import images, pools, services, toolbox
from sandboxes.choices import ImageVariant
from sandboxes.models import Sandbox
from sandboxes.schemas import (
    EXEC_RESULT,
    IMAGE_STATUS,
    SANDBOX,
    SANDBOX_BY_ID,
    SANDBOX_CREATE,
    SANDBOX_CREATED,
    SANDBOX_ID,
    SANDBOX_NAME,
    TOOLBOX_STATUS,
    serialize_exec_result,
    serialize_image_status,
    serialize_sandbox,
    serialize_toolbox_status,
)
from sandboxes.tasks import build_image, install_toolbox


@registry.method(
    "sandbox.create",
    description="Create a hardened sandbox with a git workspace (empty or cloned from repo), tagged "
    "cocoon-baseline. Unset fields take the settings' sandbox defaults. Claims a started sandbox from the "
    "warm pool of these options when there is one (fromPool), unless pool is false.",
    params=SANDBOX_CREATE,
    result=SANDBOX_CREATED,
    agent_side=True,
)
def sandbox_create(call: Call) -> dict[str, Any]:
    created = pools.create_sandbox(actor=call.actor, **call.params)
    return serialize_sandbox(created.sandbox) | {"fromPool": created.from_pool}


@registry.method(
    "sandbox.list",
    reads=True,
    description="The sandboxes the caller may see (its project's), newest first.",
    result=array(SANDBOX),
    agent_side=True,
)
def sandbox_list(call: Call) -> list[dict[str, Any]]:
    return [serialize_sandbox(sandbox) for sandbox in Sandbox.objects.visible_to(call.actor)]


@registry.method(
    "sandbox.get",
    reads=True,
    description="One sandbox.",
    params=SANDBOX_BY_ID,
    result=SANDBOX,
    agent_side=True,
)
def sandbox_get(call: Call) -> dict[str, Any]:
    return serialize_sandbox(call.row("sandboxId", services.get_sandbox))


@registry.method(
    "sandbox.start",
    description="Start a stopped sandbox.",
    params=SANDBOX_BY_ID,
    result=SANDBOX,
    agent_side=True,
)
def sandbox_start(call: Call) -> dict[str, Any]:
    return serialize_sandbox(services.start_sandbox(call.params["sandboxId"], actor=call.actor))


@registry.method(
    "sandbox.stop",
    description="Stop a sandbox; its files are kept.",
    params=SANDBOX_BY_ID,
    result=SANDBOX,
    agent_side=True,
)
def sandbox_stop(call: Call) -> dict[str, Any]:
    return serialize_sandbox(services.stop_sandbox(call.params["sandboxId"], actor=call.actor))


@registry.method(
    "sandbox.rename",
    description="Give a sandbox another name (unique); its id stays the same.",
    params=obj({"sandboxId": SANDBOX_ID, "name": SANDBOX_NAME}, required=("sandboxId", "name")),
    result=SANDBOX,
    agent_side=True,
)
def sandbox_rename(call: Call) -> dict[str, Any]:
    renamed = services.rename_sandbox(call.params["sandboxId"], call.params["name"], actor=call.actor)
    return serialize_sandbox(renamed)


@registry.method(
    "sandbox.delete",
    description="Delete a sandbox with its workspace.",
    params=SANDBOX_BY_ID,
    result=EMPTY,
    agent_side=True,
)
def sandbox_delete(call: Call) -> dict[str, Any]:
    services.delete_sandbox(call.params["sandboxId"], actor=call.actor)
    return {}


@registry.method(
    "sandbox.exec",
    description="Run a command (argv) in a running sandbox as its agent user; answers exit code and output.",
    params=obj(
        {
            "sandboxId": SANDBOX_ID,
            "command": array(string(maxLength=65536), minItems=1, maxItems=1000),
            "cwd": string(pattern="^/", maxLength=4096),
            "env": ENV,
            "stdin": string(maxLength=16 * 1024 * 1024),
            "timeoutS": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
        },
        required=("sandboxId", "command"),
    ),
    result=EXEC_RESULT,
    agent_side=True,
)
def sandbox_exec(call: Call) -> dict[str, Any]:
    params = call.params
    result = services.exec_in_sandbox(
        params["sandboxId"],
        params["command"],
        cwd=params.get("cwd"),
        env=params.get("env"),
        stdin=params.get("stdin"),
        timeout_s=params.get("timeoutS", 60),
    )
    return serialize_exec_result(result)


@registry.method(
    "image.status",
    reads=True,
    description="The sandbox image variants and whether they are built.",
    result=array(IMAGE_STATUS),
    admin=True,
)
def image_status(call: Call) -> list[dict[str, Any]]:
    return [serialize_image_status(status) for status in images.image_status()]


@registry.method(
    "image.build",
    description="Build a sandbox image variant in the background; progress arrives as image.build events. "
    "One build of a variant at a time: while one runs, the call queues nothing (queued false, running true).",
    params=obj({"variant": enum(*ImageVariant.values)}),
    result=obj({"queued": BOOLEAN, "running": BOOLEAN, "tag": STRING}),
    admin=True,
)
def image_build(call: Call) -> dict[str, Any]:
    variant = call.params.get("variant", ImageVariant.BASE)
    tag = images.image_tag(variant)
    if images.build_running(variant):
        return {"queued": False, "running": True, "tag": tag}
    transaction.on_commit(lambda: build_image.delay(variant))
    return {"queued": True, "running": False, "tag": tag}


@registry.method(
    "toolbox.status",
    reads=True,
    description="Whether the agent toolbox (/opt/agents) is installed, and its package versions.",
    result=TOOLBOX_STATUS,
    admin=True,
)
def toolbox_status(call: Call) -> dict[str, Any]:
    return serialize_toolbox_status(toolbox.toolbox_status())


@registry.method(
    "toolbox.install",
    description="Install or update the agent toolbox in the background (no image rebuild); progress "
    "arrives as toolbox.install events. One at a time: while one runs, the call queues nothing "
    "(queued false, running true) and that install's events tell.",
    result=obj({"queued": BOOLEAN, "running": BOOLEAN}),
    admin=True,
)
def toolbox_install(call: Call) -> dict[str, Any]:
    if toolbox.install_running():
        return {"queued": False, "running": True}
    transaction.on_commit(install_toolbox.delay)
    return {"queued": True, "running": False}
