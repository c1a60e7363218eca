"""The production topology the README recommends for larger hosts, run for real (issue #14): PostgreSQL,
Redis, two cocoond processes sharing one data directory and one instance name (as behind a load
balancer), and one separate `celery -A cocoon worker -B` — exactly what deploy/compose.yaml runs."""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from websockets.sync.client import connect

from tests.conftest import ROOT, Cocoond, WsClient, server_env

pytestmark = pytest.mark.e2e

IDLE_S = 60  # an idle subscription must outlive this (it died after ~5 s with Redis once)
POLL_EVERY_S = 2  # the worker's beat sends agents.tasks.poll this often (cocoon/celery.py)
QUIET_WAIT_S = 11  # longer than two of agent.wait's RECHECK_S


@pytest.fixture
def worker(tmp_path: Path):
    """Start the one separate worker with beat, as deploy/ runs it; stopped by PID afterwards."""
    started: list[subprocess.Popen] = []

    def start(env: dict[str, str]) -> subprocess.Popen:
        with (tmp_path / "worker.log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "cocoon", "worker", "-B", "--loglevel=INFO"],
                cwd=ROOT,
                env=server_env(**env),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def attach(instance: Cocoond, agent_id: str):
    return connect(f"ws://127.0.0.1:{instance.port}/v1/agents/{agent_id}/attach?token={instance.token}")


def read_until(ws, needle: bytes, timeout: float = 15) -> bytes:
    seen, deadline = b"", time.monotonic() + timeout
    while needle not in seen:
        seen += ws.recv(timeout=max(0.1, deadline - time.monotonic()))
    return seen


def events_until(ws: WsClient, predicate, timeout: float = 30) -> dict:
    """The first event frame that satisfies predicate; the others are dropped."""
    deadline = time.monotonic() + timeout
    while True:
        event = ws.next_event(timeout=max(0.1, deadline - time.monotonic()))["event"]
        if predicate(event):
            return event


def agent_became(status: str):
    return lambda event: event["type"] == "agent.updated" and event["data"]["status"] == status


def test_the_recommended_production_topology(
    postgres_url, redis_url, start_cocoond, worker, sandbox_image, tmp_path_factory, docker_client
):
    started = time.monotonic()
    data = tmp_path_factory.mktemp("topology") / "data"
    env = {
        "DATABASE_URL": postgres_url,
        "REDIS_URL": redis_url,
        "COCOON_INSTANCE": f"{os.environ['COCOON_INSTANCE']}topo",
    }
    # Both cocoond start at once on an empty database, as a compose file or two units would start them:
    # one migrates and sets up, neither fails, both serve the same admin token.
    with ThreadPoolExecutor(2) as pool:
        one, two = pool.map(lambda _: start_cocoond(env=env, data=data), range(2))
    assert one.token == two.token
    for instance in (one, two):
        info = instance.call("system.info")
        assert info["embeddedWorker"] is False
    the_worker = worker({"COCOON_DATA": str(data), **env})

    with one.ws() as idle, one.ws() as listener, two.ws() as waiter:
        # The idle subscription hears nothing until the very end, IDLE_S later.
        idle.call("events.subscribe", {"types": ["settings.updated"]})
        idle_since = time.monotonic()
        listener.call("events.subscribe", {})

        # Caused through #2, heard on #1: a secret set on #2 is readable through #1 (one secrets key).
        two.call("secrets.set", {"name": "TOPOLOGY_SECRET", "value": "x"})
        event = events_until(listener, lambda e: e["type"] == "activity")
        assert event["data"]["key"] == "secret.set"
        assert [s["name"] for s in one.call("secrets.list")] == ["TOPOLOGY_SECRET"]

        # Caused by the worker, heard on #1: #2 only queues the prune; the worker runs it.
        two.call("activity.prune", {"olderThanDays": 0})
        event = events_until(listener, lambda e: e["data"].get("key") == "activity.pruned", timeout=60)
        assert event["data"]["params"]["count"] >= 1

        # A sandbox made through #2, an agent spawned through #1: the worker's poller decides its
        # status, and agent.wait over WS on #2 returns when it does.
        sandbox = two.call("sandbox.create", {"network": "none"})
        agent = one.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
        idle_agent = waiter.request(
            "agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 60}, timeout=70
        )
        assert idle_agent["result"]["status"] == "idle"
        heard = events_until(
            listener, lambda e: e["type"] == "agent.updated" and e["data"]["status"] == "idle"
        )
        assert heard["agentId"] == agent["id"]

        # The terminal attaches through either cocoond: typed on #2, seen on #1.
        with attach(two, agent["id"]) as typing, attach(one, agent["id"]) as watching:
            typing.send(b"echo via-$((2*21))\r")
            assert b"via-42" in read_until(typing, b"via-42")
            assert b"via-42" in read_until(watching, b"via-42")

        # While the worker polls, neither cocoond polls the sandbox as well: waits that hear nothing cost
        # no exec of their own (each cocoond polled every 5 s when it heard nothing).
        container = docker_client.containers.get(f"{env['COCOON_INSTANCE']}-{sandbox['id']}")
        never = {"agentId": agent["id"], "until": ["blocked"], "timeoutS": QUIET_WAIT_S}
        since = time.time()
        with ThreadPoolExecutor(1) as pool:
            on_one = pool.submit(one.post, "agent.wait", never)
            assert (
                waiter.request("agent.wait", never, timeout=QUIET_WAIT_S + 10)["error"]["code"] == "timeout"
            )
            assert on_one.result().json()["error"]["code"] == "timeout"
        execs = docker_client.events(
            since=since, until=time.time(), filters={"container": container.id, "event": "exec_create"}
        )
        assert len(list(execs)) <= QUIET_WAIT_S // POLL_EVERY_S + 1  # the worker's ticks, no more

        # The work the worker observes: a command starts and ends; the wait on #2 is woken by the
        # worker's poll, well within the few seconds after which it would look for itself.
        one.call("agent.send_input", {"agentId": agent["id"], "text": "sleep 3; exit 3"})
        sent = time.monotonic()
        working = waiter.request(
            "agent.wait", {"agentId": agent["id"], "until": ["working"], "timeoutS": 30}, timeout=40
        )
        assert working["result"]["status"] == "working"
        exited = waiter.request(
            "agent.wait", {"agentId": agent["id"], "until": ["exited"], "timeoutS": 30}, timeout=40
        )
        assert (exited["result"]["status"], exited["result"]["exitCode"]) == ("exited", 3)
        assert time.monotonic() - sent < 3 + 5
        heard = events_until(listener, agent_became("exited"))
        assert heard["data"]["exitCode"] == 3
        exits = one.call("activity.list", {"agentId": agent["id"]})
        assert [entry["key"] for entry in exits].count("agent.exited") == 1

        two.call("sandbox.delete", {"sandboxId": sandbox["id"]})

        # The idle subscription is still open after IDLE_S and still delivers.
        idle_for = time.monotonic() - idle_since
        time.sleep(max(0.0, IDLE_S - idle_for))
        with pytest.raises(TimeoutError):
            idle.next_event(timeout=0.1)
        two.call("settings.update", {"sandbox": {"image": "cocoon-sandbox:db"}})
        assert idle.next_event()["event"]["data"]["sandbox"]["image"] == "cocoon-sandbox:db"

    assert the_worker.poll() is None
    assert one.proc.poll() is None
    assert two.proc.poll() is None
    print(
        f"topology test: {time.monotonic() - started:.1f} s, idle for {time.monotonic() - idle_since:.1f} s"
    )


def _read_key(path: str) -> str:
    from cocoon.datadir import read_or_create_private_file

    return read_or_create_private_file(Path(path), lambda: os.urandom(16).hex())


def test_processes_starting_at_once_on_one_data_directory_share_one_key(tmp_path):
    # A file created but not yet written was read as an empty key by the process that lost the race.
    from multiprocessing import get_context

    with get_context("spawn").Pool(8) as pool:
        for attempt in range(10):
            path = str(tmp_path / f"key-{attempt}")
            keys = pool.map(_read_key, [path] * 16)
            assert len(set(keys)) == 1
            assert len(keys[0]) == 32
    assert not list(tmp_path.glob(".*.tmp"))
