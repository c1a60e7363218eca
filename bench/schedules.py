"""The schedule tick and task throughput, each next to a baseline measured in the same run.

1. Tick cost: schedules.tick() on a database of its own (SQLite, migrated here) with no schedule, then
   with --schedules schedules of which none is due, then with --due of them due (each due one creates
   its run). Only the due ones should cost anything: the tick asks an index for them.
2. Throughput: --tasks one-step shell tasks (write a file, write the report, exit) created at once on a
   cocoond of its own, until every one is done and its sandbox removed; next to the same shell command
   run directly in as many `docker run --rm` containers at once.

    .venv/bin/python bench/schedules.py [--schedules 1000] [--due 10] [--tasks 20]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import IMAGE, cocoond, sandbox_image  # noqa: E402

COMMAND = "echo hello > greeting.txt"
REPORT = """printf '{"ok": true, "summary": "hi", "autoClose": true}' > "$COCOON_REPORT_FILE"; exit"""
TEMPLATE = {
    "prompt": "bench",
    "sandbox": {"network": "none"},
    "workflow": [{"profile": "shell", "prompt": f"{COMMAND}; {REPORT}", "timeoutS": 300}],
}


def timed(function, repeat: int = 20) -> float:
    """Median seconds of one call."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def tick_cost(count: int, due: int) -> None:
    os.environ.update(
        COCOON_DATA=tempfile.mkdtemp(prefix="cocoon-bench-tick-"),
        DJANGO_SETTINGS_MODULE="cocoon.settings",
        COCOON_LOG_LEVEL="WARNING",
    )
    import django

    django.setup()
    from django.core.management import call_command

    from agents.profiles import ensure_profiles
    from scheduling import schedules
    from scheduling.models import Schedule, Task

    call_command("migrate", verbosity=0)
    ensure_profiles()
    now = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)
    empty = timed(lambda: schedules.tick(now))
    future = now + timedelta(hours=1)
    Schedule.objects.bulk_create(
        Schedule(name=f"s{n}", cron="0 * * * *", template=TEMPLATE, overlap="parallel", next_run_at=future)
        for n in range(count)
    )
    idle = timed(lambda: schedules.tick(now))

    def due_tick() -> None:
        Schedule.objects.filter(name__in=[f"s{n}" for n in range(due)]).update(next_run_at=now)
        started = time.perf_counter()
        assert len(schedules.tick(now)) == due
        samples.append(time.perf_counter() - started)

    samples: list[float] = []
    for _ in range(10):
        due_tick()
    busy = statistics.median(samples)
    Task.objects.all().delete()
    print("tick, median of 20 (10 with due schedules), SQLite\n")
    print(f"{'':<44} {'ms':>8}")
    print(f"{'no schedules (baseline)':<44} {empty * 1000:>8.2f}")
    print(f"{f'{count} schedules, none due':<44} {idle * 1000:>8.2f}   {idle / empty:.2f}x baseline")
    print(f"{f'{count} schedules, {due} due (each creates a run)':<44} {busy * 1000:>8.2f}   "
          f"{(busy - idle) / due * 1000:.2f} ms per due schedule\n")  # fmt: skip


def throughput(tasks: int) -> None:
    sandbox_image()
    script = COMMAND.replace("greeting.txt", "/tmp/greeting.txt")

    def plain(_: int) -> None:
        subprocess.run(
            ["docker", "run", "--rm", "--network", "none", IMAGE, "sh", "-c", script],
            check=True,
            capture_output=True,
        )

    started = time.perf_counter()
    with ThreadPoolExecutor(tasks) as pool:
        list(pool.map(plain, range(tasks)))
    baseline = time.perf_counter() - started

    with cocoond() as server:
        api = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=300
        )
        started = time.perf_counter()
        ids = [api.post("/v1/rpc/task.create", json=TEMPLATE).json()["result"]["id"] for _ in range(tasks)]
        pending = set(ids)
        while pending:
            time.sleep(0.2)
            listed = api.post("/v1/rpc/task.list", json={"limit": tasks}).json()["result"]
            statuses = {task["id"]: task["status"] for task in listed}
            failed = [
                task_id for task_id in pending if statuses.get(task_id) not in {"queued", "running", "done"}
            ]
            assert not failed, [task for task in listed if task["id"] in failed]
            pending = {task_id for task_id in pending if statuses.get(task_id) != "done"}
        total = time.perf_counter() - started
        left = len(api.post("/v1/rpc/sandbox.list", json={}).json()["result"])
    cores = os.cpu_count()
    print(f"{tasks} short shell tasks at once, {cores} cores\n")
    print(f"{'':<52} {'s':>7}")
    print(f"{f'{tasks} x docker run --rm ... sh -c (baseline, parallel)':<52} {baseline:>7.1f}")
    label = f"{tasks} x task.create -> done, sandbox removed"
    print(f"{label:<52} {total:>7.1f}   {total / baseline:.2f}x baseline")
    print(f"sandboxes left afterwards: {left}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--due", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=20)
    args = parser.parse_args()
    tick_cost(args.schedules, args.due)
    throughput(args.tasks)


if __name__ == "__main__":
    main()
