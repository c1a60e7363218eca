"""Results leave a sandbox only as a patch, a tar or a push (SPEC §6), through a live cocoond."""

import base64
import io
import json
import os
import subprocess
import tarfile

import httpx
import pytest

from tests.conftest import open_to
from tests.githost import GitHost

GIT_ENV = (
    os.environ
    | {k: "t" for k in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")}
    | {
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
)
BINARY = bytes(range(256)) * 40
TOKEN = "ghp_stand_in_token_0123456789abcdef"


def git(*args, cwd=None):
    return subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module")
def github(cocoond, sandbox_image, docker_client, tmp_path_factory):
    """A stand-in GitHub on this instance's open network, with owner/project.git to clone and push."""
    root = tmp_path_factory.mktemp("github")
    work = root / "work"
    git("init", "-q", "-b", "main", str(work))
    (work / "README.md").write_text("# project\n\nline two\n")
    (work / "old.txt").write_text("to be renamed\n" * 20)
    (work / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (work / "src").mkdir()
    (work / "src" / "app.py").write_text("print('bye')\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "baseline", cwd=work)
    (root / "owner").mkdir()
    git("clone", "-q", "--bare", str(work), str(root / "owner" / "project.git"))
    gateway = docker_client.networks.get(f"{cocoond.instance}-outbound").attrs["IPAM"]["Config"][0]["Gateway"]
    host = GitHost(gateway, root, TOKEN)
    cocoond.call("settings.update", {"git": {"githubUrl": host.url, "githubApiUrl": f"{host.url}/api"}})
    cocoond.call("secrets.set", {"name": "GITHUB_TOKEN", "value": TOKEN})
    with open_to(cocoond, gateway):
        yield host
    host.close()
    cocoond.call("settings.reset", {"keys": ["git"]})
    cocoond.call("secrets.delete", {"name": "GITHUB_TOKEN"})


@pytest.fixture
def cloned(cocoond, github):
    sandbox = cocoond.call("sandbox.create", {"network": "open", "repo": f"{github.url}/owner/project.git"})
    yield sandbox
    cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def call(cocoond, method, sandbox, **params):
    return cocoond.call(method, {"sandboxId": sandbox["id"], **params})


def error(cocoond, method, sandbox, **params):
    response = cocoond.post(method, {"sandboxId": sandbox["id"], **params})
    assert response.status_code >= 400, response.text
    return response.json()["error"]


def sh(cocoond, sandbox, script):
    return call(cocoond, "sandbox.exec", sandbox, command=["bash", "-c", script])


def test_files_api_round_trips_text_and_binary(cocoond, cloned):
    call(cocoond, "files.mkdir", cloned, path="notes")
    call(cocoond, "files.write", cloned, path="notes/hello.txt", content="grüß dich\n")
    call(
        cocoond,
        "files.write",
        cloned,
        path="/workspace/blob.bin",
        content=base64.b64encode(BINARY).decode(),
        encoding="base64",
    )
    assert call(cocoond, "files.read", cloned, path="notes/hello.txt") == {
        "content": "grüß dich\n",
        "encoding": "utf-8",
    }
    blob = call(cocoond, "files.read", cloned, path="blob.bin")
    assert blob["encoding"] == "base64"
    assert base64.b64decode(blob["content"]) == BINARY
    entries = {entry["name"]: entry for entry in call(cocoond, "files.list", cloned, path=".")["entries"]}
    assert entries["blob.bin"]["size"] == len(BINARY)
    assert entries["notes"]["type"] == "directory"
    assert entries["script.sh"]["type"] == "file"
    assert error(cocoond, "files.delete", cloned, path="notes")["code"] == "conflict"
    call(cocoond, "files.delete", cloned, path="notes", recursive=True)
    assert error(cocoond, "files.read", cloned, path="notes/hello.txt")["code"] == "not_found"
    too_big = base64.b64encode(b"x" * (4 * 1024 * 1024)).decode()
    assert (
        error(cocoond, "files.write", cloned, path="big.bin", content=too_big, encoding="base64")["code"]
        == "invalid_params"
    )


def test_the_diff_applies_to_the_baseline_byte_for_byte(cocoond, cloned, github, tmp_path):
    sh(
        cocoond,
        cloned,
        "printf '# project\\n\\nline two, edited\\n' > README.md && git mv old.txt new.txt && "
        "rm src/app.py && chmod +x script.sh && mkdir -p docs && echo untracked > docs/new.md",
    )
    call(
        cocoond,
        "files.write",
        cloned,
        path="blob.bin",
        content=base64.b64encode(BINARY).decode(),
        encoding="base64",
    )
    result = call(cocoond, "sandbox.diff", cloned)
    statuses = {entry["path"]: entry["status"] for entry in result["files"]}
    assert statuses == {
        "README.md": "modified",
        "new.txt": "renamed",
        "src/app.py": "deleted",
        "script.sh": "modified",
        "docs/new.md": "added",
        "blob.bin": "added",
    }
    blob = next(entry for entry in result["files"] if entry["path"] == "blob.bin")
    assert (blob["added"], blob["deleted"]) == (None, None)  # binary
    assert "GIT binary patch" in result["patch"]

    copy = tmp_path / "copy"
    git("clone", "-q", str(github.root / "owner" / "project.git"), str(copy))
    (tmp_path / "change.patch").write_text(result["patch"], errors="surrogateescape")
    git("apply", str(tmp_path / "change.patch"), cwd=copy)

    response = httpx.get(
        f"{cocoond.url}/v1/sandboxes/{cloned['id']}/archive",
        params={"path": "/workspace", "token": cocoond.token},
    )
    assert response.status_code == 200
    sandbox_files = {}
    with tarfile.open(fileobj=io.BytesIO(response.content)) as tar:
        for member in tar.getmembers():
            name = member.name.split("/", 1)[1] if "/" in member.name else ""
            if member.isfile() and not name.startswith(".git/"):
                sandbox_files[name] = (tar.extractfile(member).read(), member.mode & 0o111 != 0)
    host_files = {
        str(path.relative_to(copy)): (path.read_bytes(), os.access(path, os.X_OK))
        for path in copy.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(copy).parts
    }
    assert sandbox_files == host_files


def test_files_the_baseline_tracks_are_in_the_diff_even_where_gitignore_covers_them(cocoond, cloned):
    # A build output committed on purpose (git add -f) and ignored after: unchanged, it is no change,
    # and a change to it is one. (The patch once came from an empty index, which left it out: deleted.)
    sh(
        cocoond,
        cloned,
        "echo 'dist/' > .gitignore && mkdir dist && echo built > dist/app.js && echo x > dist/map.js && "
        "git add .gitignore && git add -f dist/app.js dist/map.js && git commit -qm built && "
        "git tag -f cocoon-baseline >/dev/null && echo rebuilt > dist/map.js && echo new > new.txt",
    )
    statuses = {entry["path"]: entry["status"] for entry in call(cocoond, "sandbox.diff", cloned)["files"]}
    assert statuses == {"dist/map.js": "modified", "new.txt": "added"}


def test_a_conflicting_patch_is_reported_and_changes_nothing(cocoond, cloned):
    conflicting = (
        "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n"
        "@@ -1,3 +1,3 @@\n # project\n \n-a line that is not there\n+replacement\n"
    )
    result = call(cocoond, "sandbox.apply_patch", cloned, patch=conflicting)
    assert result["applied"] is False
    assert [conflict["path"] for conflict in result["conflicts"]] == ["README.md"]
    assert call(cocoond, "files.read", cloned, path="README.md")["content"] == "# project\n\nline two\n"
    assert (
        error(cocoond, "sandbox.apply_patch", cloned, patch="this is not a patch\n")["code"]
        == "invalid_params"
    )
    good = conflicting.replace("a line that is not there", "line two")
    assert call(cocoond, "sandbox.apply_patch", cloned, patch=good, check=True)["applied"] is False
    assert call(cocoond, "sandbox.apply_patch", cloned, patch=good)["applied"] is True
    assert call(cocoond, "files.read", cloned, path="README.md")["content"] == "# project\n\nreplacement\n"


@pytest.mark.parametrize(
    "path", ["../../etc/passwd", "/etc/passwd", "rootlink/etc/passwd", "etclink/passwd", "hostlink/README.md"]
)
def test_paths_outside_the_workspace_are_refused(cocoond, cloned, path):
    sh(cocoond, cloned, "ln -s / rootlink && ln -s /etc etclink && ln -s /work/main hostlink")
    assert error(cocoond, "files.read", cloned, path=path)["code"] in {"forbidden", "not_found"}
    assert error(cocoond, "files.write", cloned, path=path, content="x")["code"] in {"forbidden", "not_found"}
    response = httpx.get(
        f"{cocoond.url}/v1/sandboxes/{cloned['id']}/archive", params={"path": path, "token": cocoond.token}
    )
    assert response.status_code in {403, 404}


def test_an_archive_holds_nothing_from_outside_the_path(cocoond, cloned):
    sh(
        cocoond,
        cloned,
        "mkdir -p out && ln -s / out/root && ln -s /etc/passwd out/passwd && echo in > out/file",
    )
    response = httpx.get(
        f"{cocoond.url}/v1/sandboxes/{cloned['id']}/archive", params={"path": "out", "token": cocoond.token}
    )
    with tarfile.open(fileobj=io.BytesIO(response.content)) as tar:
        members = {member.name: member for member in tar.getmembers()}
    assert set(members) == {"out", "out/root", "out/passwd", "out/file"}
    assert members["out/root"].issym()
    assert members["out/passwd"].issym()
    assert (
        httpx.get(f"{cocoond.url}/v1/sandboxes/{cloned['id']}/archive", params={"path": "out"}).status_code
        == 401
    )


def test_commit_push_and_pull_request_with_the_token_kept_out_of_the_sandbox(cocoond, cloned, github):
    call(cocoond, "files.write", cloned, path="feature.txt", content="new feature\n")
    status = call(cocoond, "git.status", cloned)
    assert status["branch"] == "main"
    assert {"path": "feature.txt", "index": "?", "worktree": "?"} in status["files"]
    commit = call(cocoond, "git.commit", cloned, message="Add feature", author="Ada <ada@example.com>")[
        "commit"
    ]
    assert error(cocoond, "git.commit", cloned, message="again")["code"] == "conflict"
    assert call(cocoond, "git.push", cloned, branch="cocoon/feature") == {
        "remote": "origin",
        "branch": "cocoon/feature",
    }
    pushed = git(
        "--git-dir", str(github.root / "owner" / "project.git"), "rev-parse", "refs/heads/cocoon/feature"
    ).strip()
    assert pushed == commit
    author = git(
        "--git-dir", str(github.root / "owner" / "project.git"), "log", "-1", "--format=%an <%ae>", pushed
    ).strip()
    assert author == "Ada <ada@example.com>"

    pull = call(
        cocoond,
        "git.create_pr",
        cloned,
        title="Feature",
        body="From cocoon",
        base="main",
        head="cocoon/feature",
    )
    assert pull["number"] == 7
    api = [request for request in github.requests if request["path"].startswith("/api/")]
    assert api[-1]["path"] == "/api/repos/owner/project/pulls"
    assert api[-1]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert json.loads(api[-1]["body"]) == {
        "title": "Feature",
        "body": "From cocoon",
        "base": "main",
        "head": "cocoon/feature",
    }

    leaks = sh(
        cocoond,
        cloned,
        f"grep -rsl {TOKEN} /workspace /home/agent /tmp /opt/cocoon; "
        f"grep -sl {TOKEN} /proc/*/cmdline /proc/*/environ; git config --list --show-origin",
    )
    assert TOKEN not in leaks["stdout"]
    assert "extraheader" not in leaks["stdout"].lower()
    assert base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode() not in leaks["stdout"]


def test_bad_input_gets_clear_errors(cocoond, cloned, github):
    assert (
        cocoond.post("files.read", {"sandboxId": "sb_nothere", "path": "x"}).json()["error"]["code"]
        == "not_found"
    )
    assert error(cocoond, "git.push", cloned, branch="--force")["code"] == "invalid_params"
    assert error(cocoond, "git.push", cloned, branch="x", remote="nope")["code"] == "not_found"
    cocoond.call("sandbox.stop", {"sandboxId": cloned["id"]})
    assert error(cocoond, "files.write", cloned, path="x.txt", content="x")["code"] == "conflict"


def test_a_push_without_a_remote_says_how_to_set_one_and_then_works_from_the_ui_too(cocoond, github):
    """Issue #37: "Push" on a sandbox without a remote led to a full-page error with no way back."""
    sandbox = cocoond.call("sandbox.create", {"network": "none"})  # no repository: no remote
    try:
        call(cocoond, "files.write", sandbox, path="work.txt", content="done\n")
        commit = call(cocoond, "git.commit", sandbox, message="Work")["commit"]
        missing = error(cocoond, "git.push", sandbox, branch="cocoon/no-remote")
        assert missing["code"] == "not_found"
        assert "git.set_remote" in missing["message"]
        refused = error(cocoond, "git.set_remote", sandbox, url="file:///etc/passwd")
        assert [(field["path"], refused["code"]) for field in refused["details"]["fields"]] == [
            ("url", "invalid_params")
        ]

        # In the UI: the push fails back on the Changes page, with the reason and the Remote form.
        with httpx.Client(base_url=cocoond.url, follow_redirects=True) as browser:
            browser.get("/login")
            login = {"token": cocoond.token, "csrfmiddlewaretoken": browser.cookies["csrftoken"]}
            browser.post("/login", data=login, headers={"Referer": f"{cocoond.url}/login"})
            page = f"{cocoond.url}/sandboxes/{sandbox['id']}/diff/"
            assert browser.get(page).status_code == 200
            headers = {"Referer": page, "X-CSRFToken": browser.cookies["csrftoken"]}
            form = {"branch": "cocoon/no-remote", "csrfmiddlewaretoken": headers["X-CSRFToken"]}
            answer = browser.post(f"/sandboxes/{sandbox['id']}/git/push", data=form, headers=headers)
            assert (answer.status_code, str(answer.url)) == (200, page)
            assert "has no remote origin" in answer.text
            assert "data-remote-form" in answer.text
            form |= {"url": f"{github.url}/owner/project.git"}
            answer = browser.post(f"/sandboxes/{sandbox['id']}/git/set_remote", data=form, headers=headers)
            assert "The remote origin is" in answer.text
            answer = browser.post(f"/sandboxes/{sandbox['id']}/git/push", data=form, headers=headers)
            assert "Pushed." in answer.text
        pushed = git("--git-dir", str(github.root / "owner" / "project.git"), "rev-parse", "cocoon/no-remote")
        assert pushed.strip() == commit
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
