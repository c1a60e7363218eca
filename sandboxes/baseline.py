"""What a new workspace starts as: the baseline repository of its branch (one commit tagged
cocoon-baseline), or the sandbox's repo cloned into it and tagged so; and the environment git runs with
in a sandbox."""

import io
import os
import subprocess
import tarfile
import tempfile
from functools import lru_cache
from pathlib import Path

from django.utils.translation import gettext_lazy as _

from cocoon.errors import field, fields_error
from sandboxes.drivers.base import AGENT_UID, AGENT_USER, Baseline, DriverError
from sandboxes.models import Sandbox
from sandboxes.nodes import node_driver

BASELINE_TAG = "cocoon-baseline"
GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "cocoon",
    "GIT_AUTHOR_EMAIL": "cocoon@cocoon.invalid",
    "GIT_COMMITTER_NAME": "cocoon",
    "GIT_COMMITTER_EMAIL": "cocoon@cocoon.invalid",
}
CLONE_TIMEOUT_S = 600


@lru_cache(maxsize=16)
def baseline(branch: str) -> Baseline:
    """An empty git repository whose one commit is tagged cocoon-baseline, owned by the agent, as a tar.

    Made once per branch name with the server's git in a folder of our own, and put into each new
    workspace before its sandbox starts (unless its image has it baked: BASELINE_LABEL): no round trip
    into the sandbox for an empty workspace. The commit's author, committer and time are fixed, so
    every baseline of a branch is the same commit, the baked one too.
    """
    with tempfile.TemporaryDirectory() as home:
        repository = Path(home) / "workspace"
        env = GIT_ENV | {
            "HOME": home,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
            "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
        }
        for command in (
            ["git", "init", "--quiet", "--initial-branch", branch, str(repository)],
            [
                "git",
                "-C",
                str(repository),
                "commit",
                "--quiet",
                "--allow-empty",
                "--message",
                "cocoon baseline",
            ],
            ["git", "-C", str(repository), "tag", BASELINE_TAG],
        ):
            subprocess.run(command, env=env, check=True, capture_output=True)

        def owned_by_agent(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = AGENT_UID
            info.uname = info.gname = AGENT_USER
            return info

        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for entry in sorted(repository.iterdir()):
                tar.add(entry, arcname=entry.name, filter=owned_by_agent)
        return Baseline(branch, buffer.getvalue())


def clone_repository(sandbox: Sandbox) -> None:
    """Clone the sandbox's repo into /workspace inside the sandbox and tag cocoon-baseline."""
    driver = node_driver(sandbox.node)
    clone = ["clone", "--quiet"]
    if sandbox.branch:
        clone += ["--branch", sandbox.branch]
    # The baseline an image has baked (BASELINE_LABEL) is in every new workspace: it makes way.
    script = ["sh", "-c", 'rm -rf .git && exec git "$@"', "clone", *clone, "--", sandbox.repo, "."]
    result = driver.exec(sandbox.id, script, env=GIT_ENV, timeout=CLONE_TIMEOUT_S)
    if result.exit_code != 0:
        last_line = (result.stderr.decode(errors="replace").strip().splitlines() or [""])[-1]
        failed = field("repo", _("The repository could not be cloned."), "clone_failed")
        raise fields_error([failed], git=last_line[:500])
    result = driver.exec(sandbox.id, ["git", "tag", BASELINE_TAG], env=GIT_ENV, timeout=60)
    if result.exit_code != 0:
        raise DriverError(
            f"tagging the baseline failed: {result.stderr.decode(errors='replace').strip()[:500]}"
        )
