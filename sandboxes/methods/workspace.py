"""RPC methods of the workspace: files, diff, apply_patch, git."""

from typing import Any

from cocoon.registry import Call, registry
from cocoon.schema import BOOLEAN, EMPTY, STRING, array, obj, string
from sandboxes import files, git
from sandboxes.schemas import (
    DIFF,
    ENCODING,
    FILE_CONTENT,
    FILE_LIST,
    GIT_STATUS,
    PATCH_RESULT,
    PULL_REQUEST,
    SANDBOX_ID,
    serialize_diff,
    serialize_file_content,
    serialize_file_list,
    serialize_git_status,
    serialize_patch_result,
    serialize_pull_request,
)

PATH = string(minLength=1, maxLength=4096)


def _params(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    return obj({"sandboxId": SANDBOX_ID, **properties}, required=("sandboxId", *required))


@registry.method(
    "files.list",
    reads=True,
    description="Entries of a folder in the sandbox (relative paths are taken from /workspace).",
    params=_params({"path": PATH, "recursive": BOOLEAN}, "path"),
    result=FILE_LIST,
    agent_side=True,
)
def files_list(call: Call) -> dict[str, Any]:
    params = call.params
    return serialize_file_list(
        files.list_files(params["sandboxId"], params["path"], params.get("recursive", False))
    )


@registry.method(
    "files.read",
    reads=True,
    description="A file's content: UTF-8 text, or base64 for binary files (or when asked).",
    params=_params({"path": PATH, "encoding": ENCODING}, "path"),
    result=FILE_CONTENT,
    agent_side=True,
)
def files_read(call: Call) -> dict[str, Any]:
    params = call.params
    return serialize_file_content(
        files.read_file(params["sandboxId"], params["path"], params.get("encoding"))
    )


@registry.method(
    "files.write",
    description="Create or replace a file (content as UTF-8 text or base64).",
    params=_params(
        {"path": PATH, "content": string(maxLength=5 * 1024 * 1024), "encoding": ENCODING}, "path", "content"
    ),
    result=EMPTY,
    agent_side=True,
)
def files_write(call: Call) -> dict[str, Any]:
    params = call.params
    files.write_file(
        params["sandboxId"],
        params["path"],
        params["content"],
        params.get("encoding", "utf-8"),
        actor=call.actor,
    )
    return {}


@registry.method(
    "files.mkdir",
    description="Create a folder (and its parents).",
    params=_params({"path": PATH}, "path"),
    result=EMPTY,
    agent_side=True,
)
def files_mkdir(call: Call) -> dict[str, Any]:
    files.make_directory(call.params["sandboxId"], call.params["path"], actor=call.actor)
    return {}


@registry.method(
    "files.delete",
    description="Delete a file, a symlink (not its target) or a folder (recursive for a non-empty one).",
    params=_params({"path": PATH, "recursive": BOOLEAN}, "path"),
    result=EMPTY,
    agent_side=True,
)
def files_delete(call: Call) -> dict[str, Any]:
    params = call.params
    files.delete_path(params["sandboxId"], params["path"], params.get("recursive", False), actor=call.actor)
    return {}


@registry.method(
    "sandbox.diff",
    reads=True,
    description="The workspace as a git patch against cocoon-baseline (new, deleted, renamed, binary "
    "files and modes) with a per-file summary; it applies with `git apply` to the baseline.",
    params=_params({"paths": array(PATH, maxItems=1000)}),
    result=DIFF,
    agent_side=True,
)
def sandbox_diff(call: Call) -> dict[str, Any]:
    return serialize_diff(git.diff(call.params["sandboxId"], call.params.get("paths")))


@registry.method(
    "sandbox.apply_patch",
    description="Apply a git patch in the workspace (all or nothing unless threeWay); check only validates.",
    params=_params(
        {"patch": string(minLength=1, maxLength=16 * 1024 * 1024), "check": BOOLEAN, "threeWay": BOOLEAN},
        "patch",
    ),
    result=PATCH_RESULT,
    agent_side=True,
)
def sandbox_apply_patch(call: Call) -> dict[str, Any]:
    params = call.params
    result = git.apply_patch(
        params["sandboxId"],
        params["patch"],
        check=params.get("check", False),
        three_way=params.get("threeWay", False),
        actor=call.actor,
    )
    return serialize_patch_result(result)


@registry.method(
    "git.status",
    reads=True,
    description="Branch, ahead/behind and changed files of the workspace.",
    params=_params({}),
    result=GIT_STATUS,
    agent_side=True,
)
def git_status(call: Call) -> dict[str, Any]:
    return serialize_git_status(git.git_status(call.params["sandboxId"]))


@registry.method(
    "git.commit",
    description='Commit all changes (or the given paths); author as "Name <email>".',
    params=_params(
        {
            "message": string(minLength=1, maxLength=65536),
            "paths": array(PATH, maxItems=1000),
            "author": string(maxLength=300),
        },
        "message",
    ),
    result=obj({"commit": STRING}),
    agent_side=True,
)
def git_commit(call: Call) -> dict[str, Any]:
    params = call.params
    commit = git.git_commit(
        params["sandboxId"], params["message"], params.get("paths"), params.get("author"), actor=call.actor
    )
    return {"commit": commit}


@registry.method(
    "git.push",
    description="Push HEAD to a branch of a remote (default origin) on the configured GitHub host. The "
    "commits leave the sandbox as a bundle that cocoond verifies and pushes itself: GITHUB_TOKEN never "
    "enters the sandbox.",
    params=_params(
        {"branch": string(minLength=1, maxLength=255), "remote": string(minLength=1, maxLength=100)}, "branch"
    ),
    result=obj({"remote": STRING, "branch": STRING}),
    agent_side=True,
)
def git_push(call: Call) -> dict[str, Any]:
    params = call.params
    branch, remote = params["branch"], params.get("remote", "origin")
    git.git_push(params["sandboxId"], branch, remote, actor=call.actor)
    return {"remote": remote, "branch": branch}


@registry.method(
    "git.set_remote",
    description="Point a remote of the workspace (default origin) at a repository on the configured GitHub "
    "host, adding it if the workspace has none: where git.push and git.create_pr go.",
    params=_params(
        {"url": string(minLength=1, maxLength=2000), "remote": string(minLength=1, maxLength=100)}, "url"
    ),
    result=obj({"remote": STRING, "url": STRING}),
    agent_side=True,
)
def git_set_remote(call: Call) -> dict[str, Any]:
    params = call.params
    remote = params.get("remote", "origin")
    git.set_remote(params["sandboxId"], params["url"], remote, actor=call.actor)
    return {"remote": remote, "url": params["url"]}


@registry.method(
    "git.create_pr",
    description="Open a GitHub pull request for the workspace's origin repository.",
    params=_params(
        {
            "title": string(minLength=1, maxLength=256),
            "body": string(maxLength=65536),
            "base": string(minLength=1, maxLength=255),
            "head": string(minLength=1, maxLength=255),
            "remote": string(minLength=1, maxLength=100),
        },
        "title",
        "base",
        "head",
    ),
    result=PULL_REQUEST,
    agent_side=True,
)
def git_create_pr(call: Call) -> dict[str, Any]:
    params = call.params
    pull = git.create_pull_request(
        params["sandboxId"],
        params["title"],
        params.get("body", ""),
        params["base"],
        params["head"],
        params.get("remote", "origin"),
        actor=call.actor,
    )
    return serialize_pull_request(pull)
