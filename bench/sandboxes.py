"""sandbox.create against a plain `docker run -d <same image> sleep infinity`, in the same run.

Starts its own cocoond (own data directory and engine instance name), measures --runs sequential
creates of each (network none, so both skip network setup alike), then --warm-runs times create ->
first sandbox.exec answered with a sandbox claimed from a warm pool (each waits for the pool to be full
again first), then creates --parallel sandboxes at once (0: skipped) and reports the wall time,
cocoond's RSS and the memory each sandbox uses. Everything it creates is removed at the end.

    .venv/bin/python bench/sandboxes.py [--runs 10] [--warm-runs 20] [--parallel 50]
"""

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import IMAGE, cocoond, rss_mb, sandbox_image  # noqa: E402


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warm-runs", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=50)
    args = parser.parse_args()

    client = sandbox_image()
    with cocoond() as server:
        api = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=300
        )

        def call(method: str, params: dict) -> dict:
            response = api.post(f"/v1/rpc/{method}", json=params)
            assert response.status_code == 200, response.text
            return response.json()["result"]

        def create() -> str:
            return call("sandbox.create", {"network": "none"})["id"]

        plain, plain_ids = [], []
        for _ in range(args.runs):
            started = time.perf_counter()
            result = subprocess.run(
                ["docker", "run", "-d", "--network", "none", IMAGE, "sleep", "infinity"],
                capture_output=True,
                text=True,
                check=True,
            )
            plain.append(time.perf_counter() - started)
            plain_ids.append(result.stdout.strip())
        for container_id in plain_ids:
            client.containers.get(container_id).remove(force=True)

        # Like the baseline: all created first, removed afterwards, so no removal runs alongside.
        cocoon, cocoon_ids = [], []
        for _ in range(args.runs):
            started = time.perf_counter()
            cocoon_ids.append(create())
            cocoon.append(time.perf_counter() - started)
        for sandbox_id in cocoon_ids:
            api.post("/v1/rpc/sandbox.delete", json={"sandboxId": sandbox_id})

        warm = warm_creates(call, args.warm_runs)

        if not args.parallel:
            report(args, plain, cocoon, warm)
            return
        rss_before = rss_mb(server.proc.pid)
        started = time.perf_counter()
        with ThreadPoolExecutor(args.parallel) as pool:
            ids = list(pool.map(lambda _: create(), range(args.parallel)))
        parallel_s = time.perf_counter() - started
        rss_after = rss_mb(server.proc.pid)
        usages = [
            client.containers.get(f"{server.instance}-{sandbox_id}").stats(stream=False)["memory_stats"][
                "usage"
            ]
            / 2**20
            for sandbox_id in ids
        ]

    report(args, plain, cocoon, warm)
    print(f"{args.parallel} sandboxes created in parallel: {parallel_s:.1f} s")
    print(f"cocoond RSS: {rss_before:.0f} MB before, {rss_after:.0f} MB after")
    print(f"memory per sandbox: median {statistics.median(usages):.1f} MB, max {max(usages):.1f} MB")


def warm_creates(call: Callable[[str, dict], dict], runs: int) -> tuple[list[float], list[float]]:
    """Seconds from sandbox.create to its first sandbox.exec answered, each claimed from a full pool of 2,
    and of those the create's alone."""
    call("settings.update", {"sandbox": {"pools": [{"size": 2, "network": "none"}]}})
    times, claims = [], []
    for _ in range(runs):
        deadline = time.monotonic() + 60
        while call("system.info", {})["pool"] != {"ready": 2, "starting": 0}:
            assert time.monotonic() < deadline, "the pool did not fill up"
            time.sleep(0.05)
        started = time.perf_counter()
        created = call("sandbox.create", {"network": "none"})
        claims.append(time.perf_counter() - started)
        call("sandbox.exec", {"sandboxId": created["id"], "command": ["true"]})
        times.append(time.perf_counter() - started)
        assert created["fromPool"], created
        call("sandbox.delete", {"sandboxId": created["id"]})
    call("settings.update", {"sandbox": {"pools": []}})
    return times, claims


def report(
    args: argparse.Namespace,
    plain: list[float],
    cocoon: list[float],
    warm: tuple[list[float], list[float]],
) -> None:
    plain_median, cocoon_median = statistics.median(plain), statistics.median(cocoon)
    print(f"sequential creates, {args.runs} each, image {IMAGE}, network none\n")
    print(f"{'':<44} {'median s':>9} {'p95 s':>7} {'p99 s':>7}")
    for label, values in (
        ("docker run -d ... sleep infinity", plain),
        ("cocoon sandbox.create (cold)", cocoon),
        (f"warm pool: create -> first exec ({len(warm[0])})", warm[0]),
        ("  of which the create (claim)", warm[1]),
    ):
        if values:
            print(
                f"{label:<44} {statistics.median(values):>9.3f} {percentile(values, 0.95):>7.3f}"
                f" {percentile(values, 0.99):>7.3f}"
            )
    print(f"ratio (median), cold: {cocoon_median / plain_median:.2f}x  (target <= 1.2x)")
    if warm[0]:
        print("warm pool target: create -> first exec p50 <= 0.100 s, p99 <= 0.250 s")
    print()


if __name__ == "__main__":
    main()
