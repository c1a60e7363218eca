"""Chaos (issue #14): 8 clients creating, spawning in and deleting 56 sandboxes at once while reconcile runs
without pause. Every call is answered
with a result or a clear error, nothing a client was given is destroyed under it, and nothing is left
behind."""

import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import ROOT, instance_objects, server_env

pytestmark = pytest.mark.e2e
CLIENTS = 8
ROUNDS = 7  # sandboxes per client: 56 in all, the issue asks for 50


RECONCILE = """
import time
from sandboxes.reconcile import reconcile
while True:
    reconcile()
    time.sleep(0.05)
"""


def reconcile_loop(cocoond, stop: threading.Event) -> str:
    """reconcile() in a process of its own on the same data and engine objects, over and over: what the
    worker's 30 s tick does, without the waiting. Returns what it logged."""
    env = server_env(COCOON_DATA=str(cocoond.data), COCOON_INSTANCE=cocoond.instance)
    log = cocoond.data.parent / "reconcile.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-c", RECONCILE],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        stop.wait()
        process.terminate()
        process.wait(timeout=10)
    return log.read_text()


def client(cocoond, sandbox_image, number: int) -> list[str]:
    problems = []
    for round_ in range(ROUNDS):
        created = cocoond.post("sandbox.create", {"network": "none", "image": sandbox_image})
        if created.status_code != 200:
            problems.append(f"create: {created.text}")
            continue
        sandbox = created.json()["result"]
        spawned = cocoond.post("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
        if spawned.status_code != 200:
            problems.append(f"spawn in {sandbox['id']}: {spawned.text}")
        done = cocoond.post(
            "sandbox.exec", {"sandboxId": sandbox["id"], "command": ["echo", f"client {number} {round_}"]}
        )
        if done.status_code != 200 or done.json()["result"]["stdout"] != f"client {number} {round_}\n":
            problems.append(f"exec in {sandbox['id']}: {done.text}")
        deleted = cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        if deleted.status_code != 200:
            problems.append(f"delete {sandbox['id']}: {deleted.text}")
    return problems


def test_many_clients_at_once_lose_nothing_while_reconcile_runs(start_cocoond, sandbox_image, docker_client):
    cocoond = start_cocoond()
    stop = threading.Event()
    with ThreadPoolExecutor(CLIENTS + 1) as pool:
        reconciler = pool.submit(reconcile_loop, cocoond, stop)
        time.sleep(3)  # reconcile is running before the first create
        try:
            results = list(pool.map(lambda number: client(cocoond, sandbox_image, number), range(CLIENTS)))
        finally:
            stop.set()
        logged = reconciler.result()
    problems = [problem for result in results for problem in result]
    assert problems == []
    assert "removing orphaned" not in logged
    assert "Traceback" not in logged, logged[-3000:]
    assert cocoond.call("sandbox.list") == []
    leftovers = instance_objects(docker_client, cocoond.instance)
    assert not any(leftovers.values()), leftovers
