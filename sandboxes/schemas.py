"""The wire shapes of sandboxes, their workspace, images, the toolbox and nodes: their JSON Schemas and
the dicts that match them, side by side."""

from typing import Any

from cocoon.schema import (
    BOOLEAN,
    BUDGET,
    INTEGER,
    STRING,
    TIMESTAMP,
    array,
    enum,
    integer,
    nullable,
    obj,
    string,
)
from cocoon.schemas import PROJECT_ID
from sandboxes.capacity import NOTHING_USED, capacity_of, used_by_node
from sandboxes.choices import NetworkMode, NodeState, SandboxState
from sandboxes.diffs import Diff
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import ExecResult
from sandboxes.images import ImageStatus
from sandboxes.models import LOCAL_NODE, Node, Sandbox
from sandboxes.placement import Room
from sandboxes.types import (
    FileContent,
    FileEntry,
    ForeignSandbox,
    GitStatus,
    PatchResult,
    PullRequest,
    ToolboxStatus,
)

SANDBOX_ID = string(pattern="^sb_[a-z0-9]+$", maxLength=40)
SANDBOX_BY_ID = obj({"sandboxId": SANDBOX_ID}, required=("sandboxId",))
LIMITS = obj(
    {
        "cpus": {"type": "number", "exclusiveMinimum": 0, "maximum": 1024},
        "memoryMb": integer(minimum=64),
        "pids": integer(minimum=16),
    }
)
SANDBOX = obj(
    {
        "id": STRING,
        "name": STRING,
        "state": enum(*SandboxState.values),
        "network": enum(*NetworkMode.values),
        "image": STRING,
        "ips": {"type": "object", "additionalProperties": STRING},
        "repo": nullable(STRING),
        "branch": nullable(STRING),
        "limits": LIMITS,
        "runtime": nullable(STRING),
        "driver": STRING,
        "error": nullable(STRING),
        "budget": nullable(BUDGET),
        "node": STRING,  # the id of the node it runs on
        "project": STRING,  # its owner (cocoon.tenancy)
        "createdAt": TIMESTAMP,
        "updatedAt": TIMESTAMP,
    }
)
SANDBOX_NAME = string(pattern="^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
SANDBOX_CREATE = obj(
    {
        "name": SANDBOX_NAME,
        "image": string(minLength=1, maxLength=300),
        "repo": string(minLength=1, maxLength=2000),
        "branch": string(minLength=1, maxLength=255),
        "network": enum(*NetworkMode.values),
        "limits": LIMITS,
        "runtime": string(maxLength=50),
        # False: a cold create even when a warm pool has a sandbox of these options.
        "pool": BOOLEAN,
        "budget": BUDGET,  # what its agents may spend together
        # Where it runs: a node by id or name, or one whose labels include these (else placement picks).
        "node": string(minLength=1, maxLength=63),
        "nodeLabels": {"type": "object", "additionalProperties": string(maxLength=200), "maxProperties": 20},
        # Whose it is: an admin's choice (left out: the default project); a project's token makes its own.
        "project": PROJECT_ID,
    }
)
# sandbox.create's result: the sandbox, and whether it was claimed warm from a pool.
SANDBOX_CREATED = SANDBOX | {"properties": SANDBOX["properties"] | {"fromPool": BOOLEAN}}
EXEC_RESULT = obj({"exitCode": INTEGER, "stdout": STRING, "stderr": STRING, "truncated": BOOLEAN})
ENCODING = enum("utf-8", "base64")
FILE_LIST = obj(
    {
        "entries": array(
            obj(
                {
                    "name": STRING,
                    "type": enum("file", "directory", "symlink", "other"),
                    "size": INTEGER,
                    "mode": STRING,
                    "mtime": {"type": "number"},
                }
            )
        )
    }
)
FILE_CONTENT = obj({"content": STRING, "encoding": ENCODING})
DIFF = obj(
    {
        "patch": STRING,
        "files": array(
            obj(
                {
                    "path": STRING,
                    "oldPath": STRING,
                    "status": STRING,
                    "added": nullable(INTEGER),
                    "deleted": nullable(INTEGER),
                }
            )
        ),
    }
)
PATCH_RESULT = obj(
    {"applied": BOOLEAN, "valid": BOOLEAN, "conflicts": array(obj({"path": STRING, "message": STRING}))}
)
GIT_STATUS = obj(
    {
        "branch": STRING,
        "ahead": INTEGER,
        "behind": INTEGER,
        "files": array(obj({"path": STRING, "index": STRING, "worktree": STRING, "oldPath": STRING})),
    }
)
PULL_REQUEST = obj({"number": INTEGER, "url": STRING})
IMAGE_STATUS = obj(
    {
        "variant": STRING,
        "tag": STRING,
        "present": BOOLEAN,
        "id": STRING,
        "sizeMb": {"type": "number"},
        "createdAt": STRING,
    }
)
TOOLBOX_STATUS = obj(
    {
        "installed": BOOLEAN,
        "current": BOOLEAN,
        "packages": array(STRING),
        "versions": {"type": "object", "additionalProperties": STRING},
        "preparedAt": nullable(STRING),
    }
)
NODE_LABELS = {
    "type": "object",
    "propertyNames": {"pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"},
    "additionalProperties": string(maxLength=200),
    "maxProperties": 20,
}
ROOM = obj({"cpus": {"type": "number"}, "memoryMb": integer(), "sandboxes": integer()})
NODE = obj(
    {
        "id": STRING,
        "name": STRING,
        "url": nullable(STRING),
        "tls": BOOLEAN,
        "labels": NODE_LABELS,
        "capacity": {"type": "object"},
        "overrides": {"type": "object"},
        "used": ROOM,
        "state": enum(*NodeState.values),
        "draining": BOOLEAN,
        "facts": {"type": "object"},
        "error": nullable(STRING),
        "checkedAt": nullable(TIMESTAMP),
        "createdAt": TIMESTAMP,
    }
)


def serialize_sandbox(sandbox: Sandbox) -> dict[str, Any]:
    return {
        "id": sandbox.id,
        "name": sandbox.name,
        "state": sandbox.state,
        "network": sandbox.network,
        "image": sandbox.image,
        "ips": sandbox.ips,
        "repo": sandbox.repo or None,
        "branch": sandbox.branch or None,
        "limits": {"cpus": sandbox.cpus, "memoryMb": sandbox.memory_mb, "pids": sandbox.pids},
        "runtime": sandbox.runtime or None,
        "driver": sandbox.driver,
        "error": sandbox.error or None,
        "budget": sandbox.budget,
        "node": sandbox.node,
        "project": sandbox.project_id,
        "createdAt": sandbox.created_at.isoformat(),
        "updatedAt": sandbox.updated_at.isoformat(),
    }


def serialize_exec_result(result: ExecResult) -> dict[str, Any]:
    return {
        "exitCode": result.exit_code,
        "stdout": result.stdout.decode(errors="replace"),
        "stderr": result.stderr.decode(errors="replace"),
        "truncated": result.truncated,
    }


def serialize_file_list(entries: list[FileEntry]) -> dict[str, Any]:
    return {
        "entries": [
            {
                "name": entry.name,
                "type": entry.kind,
                "size": entry.size,
                "mode": entry.mode,
                "mtime": entry.mtime,
            }
            for entry in entries
        ]
    }


def serialize_file_content(file: FileContent) -> dict[str, Any]:
    return {"content": file.content, "encoding": file.encoding}


def serialize_diff(diff: Diff) -> dict[str, Any]:
    """Also the form a task keeps its diff in (scheduling's Task.diff)."""
    files = []
    for change in diff.files:
        entry = {
            "path": change.path,
            "status": change.status,
            "added": change.added,
            "deleted": change.deleted,
        }
        if change.old_path:
            entry["oldPath"] = change.old_path
        files.append(entry)
    return {"patch": diff.patch, "files": files}


def serialize_patch_result(result: PatchResult) -> dict[str, Any]:
    return {
        "applied": result.applied,
        "conflicts": [{"path": conflict.path, "message": conflict.message} for conflict in result.conflicts],
        "valid": result.valid,
    }


def serialize_git_status(status: GitStatus) -> dict[str, Any]:
    files = []
    for change in status.files:
        entry = {"path": change.path, "index": change.index, "worktree": change.worktree}
        if change.old_path is not None:
            entry["oldPath"] = change.old_path
        files.append(entry)
    return {"branch": status.branch, "ahead": status.ahead, "behind": status.behind, "files": files}


def serialize_pull_request(pull: PullRequest) -> dict[str, Any]:
    """Also the form a task's report keeps it in (report.pullRequest)."""
    return {"number": pull.number, "url": pull.url}


def serialize_image_status(status: ImageStatus) -> dict[str, Any]:
    image = status.image
    if image is None:
        return {"variant": status.variant, "tag": status.tag, "present": False}
    return {
        "variant": status.variant,
        "tag": status.tag,
        "present": True,
        "id": image.id,
        "sizeMb": round(image.size_bytes / 1e6, 1),
        "createdAt": image.created_at,
    }


def serialize_toolbox_status(status: ToolboxStatus) -> dict[str, Any]:
    return {
        "installed": status.installed,
        "current": status.current,
        "packages": status.packages,
        "versions": status.versions,
        "preparedAt": status.prepared_at,
    }


def serialize_node(node: Node, used: Room | None = None) -> dict[str, Any]:
    """A node on the wire; used: what its sandboxes hold, when the caller has it (node.list asks once)."""
    if used is None:
        used = used_by_node(node.id).get(node.id, NOTHING_USED)
    return {
        "id": node.id,
        "name": node.name,
        "url": node.url or None,
        "tls": bool(node.cert),
        "labels": node.labels,
        "capacity": capacity_of(node),
        "overrides": node.overrides,
        "used": {"cpus": used.cpus, "memoryMb": used.memory_mb, "sandboxes": used.sandboxes},
        "state": node.state,
        "draining": node.draining,  # also while it is unreachable
        "facts": {"driver": get_driver().kind, "runtimes": get_driver().runtimes()}
        if node.id == LOCAL_NODE
        else node.facts,
        "error": node.error or None,
        "checkedAt": node.checked_at.isoformat() if node.checked_at else None,
        "createdAt": node.created_at.isoformat(),
    }


# What another data directory left on an engine: data is that directory's id (the label io.cocoon.data).
FOREIGN_SANDBOX = obj({"sandboxId": STRING, "node": STRING, "data": STRING})


def serialize_foreign_sandbox(left: ForeignSandbox) -> dict[str, Any]:
    return {"sandboxId": left.sandbox_id, "node": left.node, "data": left.data}
