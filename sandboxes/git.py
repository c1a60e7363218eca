"""git in a sandbox's workspace: the patch against cocoon-baseline, applying one, status, commit, push
(through sandboxes.gitpush) and the pull request (through sandboxes.github)."""

import re

from django.utils.translation import gettext_lazy as _

from cocoon import activity
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import Conflict, Forbidden, InvalidParams, NotFound, field_error, interpolate_lazy
from sandboxes import diffs, github, gitpush
from sandboxes.baseline import GIT_ENV
from sandboxes.drivers.base import DriverError, ExecResult
from sandboxes.nodes import driver_of
from sandboxes.types import GitStatus, PatchResult, PullRequest, StatusEntry
from sandboxes.workspace import record_change, relative, run_script, running_sandbox


class PatchTooLarge(Conflict):
    """The workspace's diff is over the limit a patch may have; the archive still has it all."""


class NothingToCommit(Conflict):
    pass


BRANCH = re.compile(r"^(?!-)(?!.*\.\.)[\w./-]{1,255}$")
REMOTE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
AUTHOR = re.compile(r"^(?P<name>[^<>]+?)\s*<(?P<email>[^<>\s]+)>$")

activity.register_messages(
    {
        "patch.applied": _("A patch was applied in sandbox %(name)s."),
        "git.committed": _("Commit %(commit)s in sandbox %(name)s."),
        "git.pushed": _("Branch %(branch)s was pushed from sandbox %(name)s."),
        "git.pr_created": _("Pull request #%(number)s was opened from sandbox %(name)s."),
        "git.remote_set": _("Remote %(remote)s of sandbox %(name)s now is %(url)s."),
    },
    visibility=Visibility.AGENT,
)

# The patch is taken with a throw-away index, so the user's own index is left as it was. It starts as a
# copy of the user's: git then hashes only files whose stat changed (an empty one re-read the whole
# tree), and files the baseline tracks stay tracked where .gitignore covers them. An index git cannot
# use from elsewhere (a split index) is dropped for an empty one.
DIFF = """
set -e
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
index=$(git rev-parse --git-path index)
export GIT_INDEX_FILE="$scratch/index"
cp -- "$index" "$GIT_INDEX_FILE" 2>/dev/null && git add -A -- "$@" 2>/dev/null ||
  { rm -f "$GIT_INDEX_FILE"; git add -A -- "$@"; }
git diff --cached -M --no-ext-diff --no-textconv --raw --numstat --patch --binary --full-index -z \\
  cocoon-baseline -- "$@"
"""
APPLY = """
patch=$(mktemp); trap 'rm -f "$patch"' EXIT
cat > "$patch"
git apply "$@" "$patch"
"""


# -- patches -------------------------------------------------------------------------------------------


def diff(sandbox_id: str, paths: list[str] | None = None) -> diffs.Diff:
    """The workspace against cocoon-baseline as one git patch (untracked, binary, renames, modes)."""
    running_sandbox(sandbox_id)
    result = run_script(sandbox_id, "diff", DIFF, *relative(paths)).checked()
    if result.truncated:
        raise PatchTooLarge(_("The patch is too large; download the archive instead."))
    return diffs.parse_diff(result.stdout)


def apply_patch(sandbox_id: str, patch: str, *, check: bool, three_way: bool, actor: Actor) -> PatchResult:
    sandbox = running_sandbox(sandbox_id)
    flags = ["--check"] if check else []
    if three_way:
        flags.append("--3way")
    result = run_script(
        sandbox_id, "apply", APPLY, *flags, stdin=patch.encode("utf-8", errors="surrogateescape")
    )
    errors = result.stderr.decode(errors="replace")
    if diffs.unreadable(errors):
        raise InvalidParams(_("This is not a patch git can read."))
    conflicts = diffs.conflicts(errors)
    applied = not check and (result.exit_code == 0 or (three_way and diffs.left_conflict_markers(errors)))
    if applied:
        record_change(sandbox, "patch.applied", actor)
    return PatchResult(applied=applied, valid=result.exit_code == 0, conflicts=conflicts)


# -- git -----------------------------------------------------------------------------------------------


def _git(
    sandbox_id: str,
    *args: str,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> ExecResult:
    return driver_of(sandbox_id).exec(
        sandbox_id, ["git", *args], stdin=stdin, env=GIT_ENV | (env or {}), timeout=timeout
    )


def git_status(sandbox_id: str) -> GitStatus:
    running_sandbox(sandbox_id)
    result = _git(sandbox_id, "status", "--porcelain=v1", "-z", "--branch").checked()
    records = result.stdout.decode(errors="replace").split("\0")
    header = records[0][3:] if records and records[0].startswith("## ") else ""
    branch = header.split("...")[0].split(" ")[0]
    files, index = [], 1
    while index < len(records) and records[index]:
        record = records[index]
        old_path = None
        if record[0] in "RC":
            old_path = records[index + 1]
            index += 1
        files.append(StatusEntry(record[3:], record[0], record[1], old_path))
        index += 1
    ahead = re.search(r"ahead (\d+)", header)
    behind = re.search(r"behind (\d+)", header)
    return GitStatus(branch, int(ahead[1]) if ahead else 0, int(behind[1]) if behind else 0, files)


def git_commit(
    sandbox_id: str, message: str, paths: list[str] | None, author: str | None, *, actor: Actor
) -> str:
    """The new commit's id."""
    sandbox = running_sandbox(sandbox_id)
    env = {}
    if author:
        match = AUTHOR.match(author)
        if not match:
            raise InvalidParams(_('The author must look like "Name <email>".'))
        env = {"GIT_AUTHOR_NAME": match["name"], "GIT_AUTHOR_EMAIL": match["email"]}
    _git(sandbox_id, "add", "-A", "--", *relative(paths)).checked()
    committed = _git(sandbox_id, "commit", "--quiet", "--file=-", stdin=message.encode(), env=env)
    if committed.exit_code != 0:
        output = (committed.stdout + committed.stderr).decode(errors="replace")
        if "nothing to commit" in output or "no changes added" in output:
            raise NothingToCommit(_("There is nothing to commit."))
        raise DriverError(output.strip()[-500:])
    commit = _git(sandbox_id, "rev-parse", "HEAD").stdout.decode().strip()
    record_change(sandbox, "git.committed", actor, commit=commit[:12])
    return commit


def _remote_url(sandbox_id: str, remote: str, *, push: bool = False) -> str:
    result = _git(sandbox_id, "remote", "get-url", *(["--push"] if push else []), "--", remote)
    if result.exit_code != 0:
        raise NotFound(
            _(
                "The sandbox has no remote %(remote)s: set one with git.set_remote (the Changes page's "
                "Remote form), a repository on %(host)s."
            ),
            remote=remote,
            host=github.base_url(),
        )
    return result.stdout.decode(errors="replace").strip()


def _github_repository(sandbox_id: str, remote: str, *, push: bool = False) -> tuple[str, str, str]:
    """The remote's URL, owner and name. The sandbox configured it, so anything but a repository on
    the configured GitHub host (file paths, ssh, ext::, other hosts, dot segments) is refused."""
    url = _remote_url(sandbox_id, remote, push=push)
    found = github.repository(url)
    if found is None:
        raise Forbidden(
            _(
                "The remote %(remote)s is not a repository on %(host)s: "
                "cocoon pushes and opens pull requests only there."
            ),
            remote=remote,
            host=github.base_url(),
        )
    return url, *found


def git_push(sandbox_id: str, branch: str, remote: str = "origin", *, actor: Actor) -> None:
    sandbox = running_sandbox(sandbox_id)
    if not BRANCH.match(branch):
        raise InvalidParams(_("%(branch)s is not a valid branch name."), branch=branch)
    if not REMOTE.match(remote):
        raise InvalidParams(_("%(remote)s is not a valid remote name."), remote=remote)
    url = _github_repository(sandbox_id, remote, push=True)[0]
    gitpush.push(sandbox_id, url, github.base_url(), branch, project=str(sandbox.project_id))
    record_change(sandbox, "git.pushed", actor, branch=branch)


def set_remote(sandbox_id: str, url: str, remote: str = "origin", *, actor: Actor) -> None:
    """Point a remote of the workspace at a repository on the configured GitHub host (added, or changed):
    the only place git.push and git.create_pr go."""
    sandbox = running_sandbox(sandbox_id)
    if not REMOTE.match(remote):
        raise InvalidParams(_("%(remote)s is not a valid remote name."), remote=remote)
    if github.repository(url) is None:
        raise field_error(
            "url",
            interpolate_lazy(
                _("%(url)s is not a repository on %(host)s: cocoon pushes only there."),
                {"url": url, "host": github.base_url()},
            ),
        )
    exists = _git(sandbox_id, "remote", "get-url", "--", remote).exit_code == 0
    _git(sandbox_id, "remote", "set-url" if exists else "add", "--", remote, url).checked()
    record_change(sandbox, "git.remote_set", actor, remote=remote, url=url)


def create_pull_request(
    sandbox_id: str, title: str, body: str, base: str, head: str, remote: str = "origin", *, actor: Actor
) -> PullRequest:
    sandbox = running_sandbox(sandbox_id)
    _url, owner, name = _github_repository(sandbox_id, remote)
    pull = github.create_pull_request(owner, name, title, body, base, head, project=str(sandbox.project_id))
    record_change(sandbox, "git.pr_created", actor, number=pull["number"])
    return PullRequest(pull["number"], pull.get("html_url", ""))
