"""Exfil: GITHUB_TOKEN never reaches sandbox-controlled git (issue #13 item 3, SPEC §5).

The attacker is a process inside the sandbox: it arms every git extension point that could see a
credential, watches every process's environment and command line, and points remotes elsewhere. git.push
must still push, with the token reaching only the git host, and must refuse what it cannot verify.
"""

import base64
import uuid
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.test_workspace import TOKEN, call, error, git, github, sh  # noqa: F401 - the stand-in GitHub

pytestmark = pytest.mark.e2e

BASIC = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
# Unique, so a trap that ran on the host instead of in the sandbox would show up in the host's /tmp.
LOOT = f"/tmp/loot-{uuid.uuid4().hex}"

# Every trap records its environment, its parent's environment and command line, and what it was given.
STEAL = f"""#!/bin/sh
name=$1; shift
{{ echo "== $name $*"; env; tr '\\0' '\\n' </proc/$PPID/environ; tr '\\0' ' ' </proc/$PPID/cmdline; }} \
  >>{LOOT}/ran-$name 2>&1
case $name in
  filter) cat ;;                                  # a clean filter must pass the content through
  pre-push) cat >>{LOOT}/ran-$name; sleep 2 ;;    # hold the push while the watcher looks
  credential) cat >>{LOOT}/ran-$name ;;
esac
exit 0
"""

ARM = f"""set -e
mkdir -p {LOOT}
cat >/workspace/.git/steal <<'EOF'
{STEAL}EOF
chmod +x /workspace/.git/steal
for hook in pre-push reference-transaction post-commit pre-commit push-to-checkout; do
  printf '#!/bin/sh\\nexec /workspace/.git/steal %s "$@"\\n' "$hook" >.git/hooks/$hook
  chmod +x .git/hooks/$hook
done
git config credential.helper '!/workspace/.git/steal credential'
git config core.sshCommand '/workspace/.git/steal ssh'
git config core.fsmonitor '/workspace/.git/steal fsmonitor'
git config core.askPass '/workspace/.git/steal askpass'
git config filter.steal.clean '/workspace/.git/steal filter'
git config filter.steal.smudge '/workspace/.git/steal filter'
git config filter.steal.required true
echo '* filter=steal' >.gitattributes
"""

# Reads the token patterns from stdin and keeps them only in its own memory (not exported, never in
# an argv), then greps every process's environ and cmdline for them until told to stop.
WATCH = f"""IFS= read -r raw; IFS= read -r basic
(
  exec </dev/null >/dev/null 2>&1
  while [ ! -e {LOOT}/stop ]; do
    printf '%s\\n%s\\n' "$raw" "$basic" | grep -salF -f - /proc/[0-9]*/environ /proc/[0-9]*/cmdline \
      >>{LOOT}/watch-hits
    echo . >>{LOOT}/watch-beats; sleep 0.05
  done
) &
"""


def beats(cocoond, sandbox) -> int:
    return len(sh(cocoond, sandbox, f"cat {LOOT}/watch-beats 2>/dev/null")["stdout"])


@pytest.fixture(scope="module")
def host(github):  # noqa: F811
    return github


@pytest.fixture(scope="module")
def sandbox(cocoond, host):
    created = cocoond.call("sandbox.create", {"network": "open", "repo": f"{host.url}/owner/project.git"})
    yield created
    cocoond.post("sandbox.delete", {"sandboxId": created["id"]})


def test_a_sandbox_that_traps_every_git_hook_never_sees_the_token(cocoond, sandbox, host):
    assert sh(cocoond, sandbox, ARM)["exitCode"] == 0
    started = call(
        cocoond, "sandbox.exec", sandbox, command=["bash", "-c", WATCH], stdin=f"{TOKEN}\n{BASIC}\n"
    )
    assert started["exitCode"] == 0
    wait_until(lambda: beats(cocoond, sandbox) >= 2, timeout=60)

    call(cocoond, "files.write", sandbox, path="trapped.txt", content="through the filter\n")
    commit = call(cocoond, "git.commit", sandbox, message="Trapped")["commit"]
    assert call(cocoond, "git.push", sandbox, branch="cocoon/trapped") == {
        "remote": "origin",
        "branch": "cocoon/trapped",
    }
    repository = str(host.root / "owner" / "project.git")
    assert git("--git-dir", repository, "rev-parse", "refs/heads/cocoon/trapped").strip() == commit
    pushes = [request for request in host.requests if "git-receive-pack" in request["path"]]
    assert pushes
    assert pushes[-1]["headers"].get("Authorization") == f"Basic {BASIC}"

    after = beats(cocoond, sandbox)
    wait_until(lambda: beats(cocoond, sandbox) >= after + 2, timeout=60)  # a full pass after the push
    sh(cocoond, sandbox, f"touch {LOOT}/stop")
    loot = sh(
        cocoond,
        sandbox,
        f'cd {LOOT} && for f in *; do echo "### $f"; cat "$f"; done; '
        "grep -rslF -e ghp_stand_in_token /workspace /home/agent /tmp /opt/cocoon | sed 's/^/LEAK /'; "
        "git config --list --show-origin",
    )["stdout"]
    assert "### ran-filter" in loot  # the traps were armed: the sandbox's own git ran its filter
    assert "### watch-beats" in loot
    assert TOKEN not in loot
    assert BASIC not in loot
    assert "LEAK " not in loot
    assert "extraheader" not in loot.lower()
    assert sh(cocoond, sandbox, f"cat {LOOT}/watch-hits")["stdout"] == ""
    assert not Path(LOOT).exists()  # no trap ran on the host


@pytest.mark.parametrize(
    "url",
    [
        "file:///tmp/evil.git",
        "/tmp/evil.git",
        "ext::sh -c touch% /tmp/ext-ran",
        "ssh://git@host.invalid/owner/project.git",
        "https://host.invalid/owner/project.git",
        "{base}.invalid/owner/project.git",
        "{base}/owner/../../project.git",
    ],
)
def test_a_remote_that_is_not_the_github_host_is_refused(cocoond, sandbox, host, url):
    name = f"r{uuid.uuid4().hex[:8]}"
    sh(
        cocoond,
        sandbox,
        f"git init -q --bare /tmp/evil.git; git remote add {name} '{url.format(base=host.url)}'",
    )
    before = len(host.requests)
    refused = error(cocoond, "git.push", sandbox, branch="cocoon/elsewhere", remote=name)
    assert refused["code"] == "forbidden", refused
    assert name in refused["message"]
    assert sh(cocoond, sandbox, "git --git-dir /tmp/evil.git for-each-ref; ls /tmp/ext-ran")["stdout"] == ""
    assert len(host.requests) == before


def test_a_push_url_that_differs_from_the_fetch_url_is_refused(cocoond, sandbox, host):
    sh(
        cocoond,
        sandbox,
        f"git init -q --bare /tmp/evil.git; git remote add twin {host.url}/owner/project.git; "
        "git config remote.twin.pushurl file:///tmp/evil.git",
    )
    assert error(cocoond, "git.push", sandbox, branch="cocoon/twin", remote="twin")["code"] == "forbidden"
    assert sh(cocoond, sandbox, "git --git-dir /tmp/evil.git for-each-ref")["stdout"] == ""


# A tree with an entry named .git: git itself never writes one; checked out, it is a known RCE vector.
BAD_TREE = r"""set -e
blob=$(git hash-object -w README.md)
tree=$( { printf '100644 .git\0'; printf "$(printf %s "$blob" | sed 's/../\\x&/g')"; } \
  | git hash-object -t tree --literally -w --stdin)
commit=$(git commit-tree -p HEAD -m evil "$tree")
git update-ref --no-deref HEAD "$commit"
"""


def test_a_corrupt_object_is_refused_before_anything_is_pushed(cocoond, sandbox, host):
    branch = sh(cocoond, sandbox, "git symbolic-ref HEAD")["stdout"].strip()
    made = sh(cocoond, sandbox, BAD_TREE)
    assert made["exitCode"] == 0, made["stderr"]
    try:
        before = len(host.requests)
        refused = error(cocoond, "git.push", sandbox, branch="cocoon/evil")
        assert refused["code"] == "conflict", refused
        assert "hasDotgit" in refused["details"]["git"]
        assert not [r for r in host.requests[before:] if "git-receive-pack" in r["path"]]
        refs = git(
            "--git-dir", str(host.root / "owner" / "project.git"), "for-each-ref", "refs/heads/cocoon/evil"
        )
        assert refs == ""
    finally:
        sh(cocoond, sandbox, f"git symbolic-ref HEAD {branch}")


def test_a_push_larger_than_one_read_and_a_push_of_a_known_commit_arrive_whole(cocoond, sandbox, host):
    # 6 MB of random bytes does not compress: the bundle takes more than one bounded read to come out.
    sh(cocoond, sandbox, "head -c 6000000 /dev/urandom >big.bin")
    commit = call(cocoond, "git.commit", sandbox, message="Big", paths=["big.bin"])["commit"]
    repository = str(host.root / "owner" / "project.git")
    for branch in ("cocoon/big", "cocoon/big-again"):  # the second time the remote has every commit
        call(cocoond, "git.push", sandbox, branch=branch)
        assert git("--git-dir", repository, "rev-parse", f"refs/heads/{branch}").strip() == commit
    size = git("--git-dir", repository, "cat-file", "-s", "refs/heads/cocoon/big:big.bin").strip()
    assert size == "6000000"


def test_a_sandbox_without_network_pushes_since_cocoond_does(cocoond, host):
    offline = cocoond.call("sandbox.create", {"network": "none"})
    try:
        script = f"git remote add origin {host.url}/owner/project.git && echo new >new.txt"
        assert sh(cocoond, offline, script)["exitCode"] == 0
        commit = call(cocoond, "git.commit", offline, message="Offline")["commit"]
        call(cocoond, "git.push", offline, branch="cocoon/offline")
        repository = str(host.root / "owner" / "project.git")
        assert git("--git-dir", repository, "rev-parse", "refs/heads/cocoon/offline").strip() == commit
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": offline["id"]})
