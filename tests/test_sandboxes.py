"""Sandboxes on the real Docker engine, through a live cocoond (SPEC §3)."""

import secrets
import shutil
import subprocess
import time

import httpx
import pytest

from tests.conftest import free_port, instance_objects, open_to, wait_until


@pytest.fixture
def sandboxes(cocoond, sandbox_image):
    """Create sandboxes through the API; every one is deleted afterwards."""
    created = []

    def create(**params):
        sandbox = cocoond.call("sandbox.create", params)
        created.append(sandbox["id"])
        return sandbox

    yield create
    for sandbox_id in created:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox_id})


def run(cocoond, sandbox, *command, **params):
    return cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": list(command), **params})


def sh(cocoond, sandbox, script, **params):
    return run(cocoond, sandbox, "bash", "-c", script, **params)


def test_a_sandbox_is_hardened(cocoond, sandboxes):
    sandbox = sandboxes(network="none")
    assert sandbox["state"] == "running"
    assert sandbox["id"].startswith("sb_")
    assert run(cocoond, sandbox, "id")["stdout"].startswith("uid=1000(agent) gid=1000(agent)")
    status = dict(
        line.split(":\t", 1)
        for line in run(cocoond, sandbox, "cat", "/proc/self/status")["stdout"].splitlines()
    )
    for capabilities in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert status[capabilities].strip() == "0000000000000000", capabilities
    assert status["NoNewPrivs"].strip() == "1"
    assert run(cocoond, sandbox, "stat", "-f", "-c", "%T", "/tmp")["stdout"].strip() == "tmpfs"
    # PID 1 is an init, not the sleeping placeholder.
    assert "init" in run(cocoond, sandbox, "cat", "/proc/1/cmdline")["stdout"]
    # Even root in the container cannot regain privileges.
    escalate = run(
        cocoond,
        sandbox,
        "sh",
        "-c",
        "chown root /workspace; mount -t tmpfs x /mnt",
    )
    assert escalate["exitCode"] != 0


def test_the_workspace_is_a_git_repository_tagged_cocoon_baseline(cocoond, sandboxes):
    sandbox = sandboxes(network="none")
    head = run(cocoond, sandbox, "git", "rev-parse", "HEAD")["stdout"]
    assert run(cocoond, sandbox, "git", "rev-parse", "cocoon-baseline^{commit}")["stdout"] == head
    assert run(cocoond, sandbox, "git", "status", "--porcelain")["stdout"] == ""
    assert run(cocoond, sandbox, "ls", "/opt/cocoon/bin/cocoon-status")["exitCode"] == 0
    record = run(cocoond, sandbox, "cocoon-status", "working", "ag_test1")
    assert record["exitCode"] == 0, record
    assert run(cocoond, sandbox, "cat", "/opt/cocoon/status/ag_test1")["stdout"].startswith("working ")


def test_a_new_workspace_starts_from_the_baked_baseline_or_from_cocoons_the_same_commit(
    cocoond, sandboxes, docker_client
):
    # The image bakes the baseline of "main" (io.cocoon.baseline), which the engine copies into the new
    # workspace: no archive is put. Another branch's baseline is put by cocoon, and is the same commit.
    since = time.time()
    baked, put = sandboxes(network="none"), sandboxes(network="none", branch="dev")
    puts = docker_client.events(
        since=since, until=time.time() + 1, decode=True, filters={"event": "extract-to-dir"}
    )
    assert {event["Actor"]["Attributes"]["name"] for event in puts} == {f"{cocoond.instance}-{put['id']}"}
    script = "git rev-parse cocoon-baseline^{commit} HEAD; git branch --show-current; stat -c %U .git"
    commit = sh(cocoond, baked, script)["stdout"].split("\n")[0]
    for sandbox, branch in ((baked, "main"), (put, "dev")):
        assert sh(cocoond, sandbox, script)["stdout"] == f"{commit}\n{commit}\n{branch}\nagent\n"
        assert run(cocoond, sandbox, "git", "status", "--porcelain")["stdout"] == ""


def test_exec_takes_stdin_env_cwd_and_a_timeout(cocoond, sandboxes):
    sandbox = sandboxes(network="none")
    assert run(cocoond, sandbox, "cat", stdin="from stdin\n")["stdout"] == "from stdin\n"
    assert (
        sh(cocoond, sandbox, "echo $GREETING; pwd", env={"GREETING": "hi"}, cwd="/tmp")["stdout"]
        == "hi\n/tmp\n"
    )
    failing = sh(cocoond, sandbox, "echo out; echo err >&2; exit 3")
    assert (failing["exitCode"], failing["stdout"], failing["stderr"]) == (3, "out\n", "err\n")
    started = time.monotonic()
    response = cocoond.post(
        "sandbox.exec", {"sandboxId": sandbox["id"], "command": ["sleep", "30"], "timeoutS": 1}
    )
    assert response.json()["error"]["code"] == "timeout"
    assert time.monotonic() - started < 15


def test_a_fork_bomb_is_contained_and_cocoond_keeps_answering(cocoond, sandboxes):
    sandbox = sandboxes(network="none", limits={"pids": 64})
    bomb = cocoond.post(
        "sandbox.exec",
        {
            "sandboxId": sandbox["id"],
            "command": ["bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep 3"],
            "timeoutS": 5,
        },
    )
    assert bomb.status_code in {200, 504}
    started = time.monotonic()
    assert cocoond.call("system.info")["version"]
    assert time.monotonic() - started < 5
    limit = cocoond.post(
        "sandbox.exec", {"sandboxId": sandbox["id"], "command": ["cat", "/sys/fs/cgroup/pids/pids.max"]}
    )
    if limit.status_code == 200 and limit.json()["result"]["exitCode"] == 0:
        assert limit.json()["result"]["stdout"].strip() == "64"


def test_the_memory_limit_is_enforced(cocoond, sandboxes):
    sandbox = sandboxes(network="none", limits={"memoryMb": 128})
    # tail buffers everything it reads when there are no newlines: 400 MB cannot fit in 128 MB.
    hog = sh(cocoond, sandbox, "head -c 400m /dev/zero | tail > /dev/null; echo status=$?", timeoutS=60)
    assert "status=137" in hog["stdout"]  # killed by the OOM killer
    assert run(cocoond, sandbox, "true")["exitCode"] == 0  # the sandbox itself lives on


def interfaces(cocoond, sandbox):
    lines = run(cocoond, sandbox, "cat", "/proc/net/dev")["stdout"].splitlines()[2:]
    return sorted(line.split(":")[0].strip() for line in lines)


def default_route(cocoond, sandbox):
    routes = run(cocoond, sandbox, "cat", "/proc/net/route")["stdout"].splitlines()[1:]
    return any(line.split()[1] == "00000000" for line in routes)


def gateway(docker_client, network_name):
    return docker_client.networks.get(network_name).attrs["IPAM"]["Config"][0]["Gateway"]


def test_network_none_has_only_loopback(cocoond, sandboxes):
    sandbox = sandboxes(network="none")
    assert interfaces(cocoond, sandbox) == ["lo"]
    assert sandbox["ips"] == {}


def reaches(cocoond, sandbox, host, port):
    probe = sh(cocoond, sandbox, f"timeout 3 bash -c 'echo > /dev/tcp/{host}/{port}' && echo reached")
    return "reached" in probe["stdout"]


def test_network_egress_has_no_way_out_and_no_way_to_the_host(
    cocoond, sandboxes, docker_client, outside_host
):
    sandbox = sandboxes(network="egress")
    internal = f"{cocoond.instance}-{sandbox['id']}-net"  # its own network
    assert list(sandbox["ips"]) == [internal]
    assert docker_client.networks.get(internal).attrs["Internal"] is True
    assert interfaces(cocoond, sandbox) == ["eth0", "lo"]
    # A host beyond this machine's bridges (our own network namespace) is out of reach...
    assert not reaches(cocoond, sandbox, *outside_host)
    # ...and so are cocoond and the Docker API.
    host = gateway(docker_client, internal)
    for target, port in ((host, cocoond.port), ("127.0.0.1", cocoond.port), (host, 2375), (host, 2376)):
        assert not reaches(cocoond, sandbox, target, port), (target, port)
    assert run(cocoond, sandbox, "test", "-e", "/var/run/docker.sock")["exitCode"] == 1


def test_network_open_is_a_bridge_with_a_way_out(cocoond, sandboxes, outside_host):
    sandbox = sandboxes(network="open")
    assert list(sandbox["ips"]) == [f"{cocoond.instance}-{sandbox['id']}-net"]
    assert default_route(cocoond, sandbox)
    assert reaches(cocoond, sandbox, *outside_host)
    assert "host.docker.internal" in run(cocoond, sandbox, "cat", "/etc/hosts")["stdout"]


@pytest.fixture
def git_daemon(tmp_path, cocoond, docker_client):
    """A bare repository served by `git daemon` on the gateway of this instance's open network."""
    if shutil.which("git") is None:
        pytest.fail("git is not installed")
    work, bare = tmp_path / "work", tmp_path / "served" / "project.git"
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "README.md").write_text("hello from the bare repo\n")
    subprocess.run(["git", "-C", str(work), "add", "."], check=True)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "first"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "checkout", "-qb", "feature"], check=True)
    (work / "FEATURE").write_text("on a branch\n")
    subprocess.run(["git", "-C", str(work), "add", "."], check=True)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "feature"], check=True, env=env)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    host = gateway(docker_client, f"{cocoond.instance}-outbound")
    port = free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={bare.parent}",
            f"--listen={host}",
            f"--port={port}",
        ]
    )
    time.sleep(0.5)
    with open_to(cocoond, host):
        yield f"git://{host}:{port}/project.git"
    daemon.terminate()
    daemon.wait(timeout=10)


def test_a_repository_is_cloned_into_the_workspace(cocoond, sandboxes, git_daemon):
    sandbox = sandboxes(network="open", repo=git_daemon, branch="feature")
    assert sandbox["repo"] == git_daemon
    assert (
        run(cocoond, sandbox, "cat", "README.md", "FEATURE")["stdout"]
        == "hello from the bare repo\non a branch\n"
    )
    head = run(cocoond, sandbox, "git", "rev-parse", "HEAD")["stdout"]
    assert run(cocoond, sandbox, "git", "rev-parse", "cocoon-baseline^{commit}")["stdout"] == head
    assert run(cocoond, sandbox, "git", "branch", "--show-current")["stdout"] == "feature\n"


def test_stop_and_start_keep_the_files(cocoond, sandboxes):
    sandbox = sandboxes(network="none")
    sh(cocoond, sandbox, "echo kept > notes.txt")
    stopped = cocoond.call("sandbox.stop", {"sandboxId": sandbox["id"]})
    assert stopped["state"] == "stopped"
    response = cocoond.post("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["true"]})
    assert response.json()["error"]["code"] == "conflict"
    assert cocoond.call("sandbox.start", {"sandboxId": sandbox["id"]})["state"] == "running"
    assert run(cocoond, sandbox, "cat", "notes.txt")["stdout"] == "kept\n"


def test_lifecycle_emits_events_and_activity(cocoond, sandboxes):
    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["sandbox.updated", "sandbox.deleted"]})
        sandbox = sandboxes(network="none")
        created = ws.next_event()["event"]
        assert (created["type"], created["sandboxId"], created["data"]["state"]) == (
            "sandbox.updated",
            sandbox["id"],
            "running",
        )
        cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})
        deleted = ws.next_event()["event"]
        assert (deleted["type"], deleted["data"]) == ("sandbox.deleted", {"id": sandbox["id"]})
    keys = [entry["key"] for entry in cocoond.call("activity.list", {"sandboxId": sandbox["id"]})]
    assert keys == ["sandbox.deleted", "sandbox.created"]
    assert cocoond.post("sandbox.get", {"sandboxId": sandbox["id"]}).json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"image": "cocoon-sandbox:does-not-exist"}, "image"),
        ({"limits": {"cpus": 64}}, "limits.cpus"),
        ({"limits": {"memoryMb": 10**6, "pids": 10**6}}, "limits.memoryMb"),
        ({"network": "everywhere"}, "network"),
        ({"repo": "file:///etc"}, "repo"),
        ({"repo": "--upload-pack=touch /tmp/pwned"}, "repo"),
        ({"repo": "ext::sh -c touch% /tmp/pwned"}, "repo"),
        ({"repo": "/srv/git/project.git"}, "repo"),
        ({"runtime": "runsc-does-not-exist"}, "runtime"),
        ({"name": "../etc"}, "name"),
        ({"budget": {"cost": -1}}, "budget.cost"),
    ],
)
def test_bad_input_is_rejected_and_leaves_nothing_behind(cocoond, sandbox_image, docker_client, params, path):
    before = (instance_objects(docker_client, cocoond.instance), cocoond.call("sandbox.list"))
    response = cocoond.post("sandbox.create", params)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_params"
    assert path in {field["path"] for field in error["details"]["fields"]}
    assert (instance_objects(docker_client, cocoond.instance), cocoond.call("sandbox.list")) == before


def test_an_unreachable_repository_rolls_the_create_back(cocoond, sandbox_image, docker_client):
    before = instance_objects(docker_client, cocoond.instance)
    host = gateway(docker_client, f"{cocoond.instance}-outbound")
    response = cocoond.post(
        "sandbox.create", {"network": "open", "repo": f"git://{host}:{free_port()}/nothing.git"}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["details"]["fields"][0]["code"] == "clone_failed"
    assert instance_objects(docker_client, cocoond.instance) == before
    assert all(
        sandbox["repo"] is None or "nothing.git" not in sandbox["repo"]
        for sandbox in cocoond.call("sandbox.list")
    )


def test_names_are_unique(cocoond, sandboxes):
    sandboxes(network="none", name="twin")
    response = cocoond.post("sandbox.create", {"network": "none", "name": "twin"})
    assert response.json()["error"]["code"] == "conflict"


def test_system_info_reports_the_docker_driver(cocoond):
    info = cocoond.call("system.info")
    assert info["driverKind"] == "docker"
    assert {"images", "resourceLimits", "egressEnforced"} <= set(info["capabilities"])


def test_image_build_streams_progress_events(cocoond, sandbox_image):
    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["image.build"]})
        assert cocoond.call("image.build", {"variant": "base"}) == {
            "queued": True,
            "running": False,
            "tag": "cocoon-sandbox:latest",
        }
        statuses = [ws.next_event(timeout=300)["event"]["data"]["status"]]
        # While it builds, another build of the tag is not started beside it.
        again = cocoond.call("image.build", {"variant": "base"})
        assert (again["queued"], again["running"]) == (False, True)
        while statuses[-1] not in {"done", "failed"}:
            statuses.append(ws.next_event(timeout=300)["event"]["data"]["status"])
    assert statuses[0] == "started"
    assert "progress" in statuses
    assert statuses[-1] == "done"
    status = {image["variant"]: image for image in cocoond.call("image.status")}
    assert status["base"]["present"] is True
    assert status["base"]["sizeMb"] < 250


def test_setup_checklist_has_network_and_image(cocoond, sandbox_image):
    items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
    assert items["network"]["ok"] is True
    assert items["image"]["ok"] is True


def test_the_image_item_offers_only_a_fix_that_repairs_it_and_the_fix_does(
    cocoond, docker_client, sandbox_image
):
    """Issue #38: a checklist fix must work. image.build makes cocoon's own tag, never a custom one."""

    def image_item():
        return {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}["image"]

    custom = f"cocoon-sandbox:absent-{secrets.token_hex(4)}"
    configured = cocoond.call("settings.get")["sandbox"]["image"]
    cocoond.call("settings.update", {"sandbox": {"image": custom}})
    try:
        item = image_item()
        assert (item["ok"], item["fix"]) == (False, None)
        assert custom in item["detail"]
        assert "sandbox.image" in item["detail"]
    finally:
        cocoond.call("settings.update", {"sandbox": {"image": configured}})

    # A second reference keeps the image while its tag goes: after image.build's test, :latest is the
    # only reference of its image, and sandboxes still running from it refuse a last one's removal.
    kept = f"kept-{secrets.token_hex(4)}"
    docker_client.images.get("cocoon-sandbox:latest").tag("cocoon-sandbox", kept)
    docker_client.images.remove("cocoon-sandbox:latest")  # the build cache keeps its layers
    try:
        item = image_item()
        assert (item["ok"], item["fix"]) == (False, "image.build")
        cocoond.call(item["fix"], {"variant": "base"})
        wait_until(lambda: image_item()["ok"], timeout=300, interval=1)
    finally:
        if not docker_client.images.list(name="cocoon-sandbox:latest"):
            docker_client.images.get(f"cocoon-sandbox:{kept}").tag("cocoon-sandbox", "latest")
        docker_client.images.remove(f"cocoon-sandbox:{kept}")


def test_state_is_reconciled_across_a_cocoond_restart(start_cocoond, sandbox_image, docker_client):
    instance = start_cocoond()
    kept = instance.call("sandbox.create", {"network": "none"})
    halted = instance.call("sandbox.create", {"network": "none"})
    removed = instance.call("sandbox.create", {"network": "none"})
    instance.stop()
    docker_client.containers.get(f"{instance.instance}-{halted['id']}").stop(timeout=1)
    docker_client.containers.get(f"{instance.instance}-{removed['id']}").remove(force=True)
    instance.start()
    states = {sandbox["id"]: sandbox["state"] for sandbox in instance.call("sandbox.list")}
    assert states == {kept["id"]: "running", halted["id"]: "stopped", removed["id"]: "missing"}
    assert instance.call("sandbox.exec", {"sandboxId": kept["id"], "command": ["true"]})["exitCode"] == 0
    assert instance.post("sandbox.start", {"sandboxId": removed["id"]}).json()["error"]["code"] == "conflict"
    instance.call("sandbox.delete", {"sandboxId": removed["id"]})


def test_two_instances_share_an_engine_without_touching_each_others_objects(
    start_cocoond, sandbox_image, docker_client
):
    first, second = start_cocoond(), start_cocoond()
    mine = first.call("sandbox.create", {"network": "none"})
    assert second.call("sandbox.list") == []
    second.restart()  # its reconcile at start must not take the other's container for an orphan
    assert docker_client.containers.get(f"{first.instance}-{mine['id']}").status == "running"
    assert first.call("sandbox.get", {"sandboxId": mine["id"]})["state"] == "running"


def test_cocoond_answers_while_engine_calls_run(cocoond, sandboxes):
    sandbox = sandboxes(network="none")
    assert httpx.get(f"{cocoond.url}/healthz").status_code == 200
    assert sandbox["limits"] == {"cpus": 2.0, "memoryMb": 4096, "pids": 1024}


def test_a_tty_session_runs_a_shell_in_the_sandbox(cocoond, sandboxes, settings):
    from sandboxes.drivers.docker import DockerDriver

    sandbox = sandboxes(network="none")
    settings.COCOON_INSTANCE = cocoond.instance
    tty = DockerDriver().open_tty(sandbox["id"], ["bash", "--norc"], cols=120, rows=40)
    try:
        tty.write(b"stty size; echo marker-$((6*7))\n")
        screen = b""
        deadline = time.monotonic() + 10
        while b"marker-42" not in screen and time.monotonic() < deadline:
            screen += tty.read()
        assert b"40 120" in screen
        assert b"marker-42" in screen
        tty.resize(100, 30)
        tty.write(b"stty size\n")
        deadline = time.monotonic() + 10
        while b"30 100" not in screen and time.monotonic() < deadline:
            screen += tty.read()
        assert b"30 100" in screen
    finally:
        tty.close()
