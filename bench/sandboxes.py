"""sandbox.create against a plain `docker run -d <same image> sleep infinity`, in the same run.

Starts its own cocoond (own data directory and engine instance name), measures --runs sequential
creates of each (network none, so both skip network setup alike), then creates --parallel sandboxes at
once and reports the wall time, cocoond's RSS and the memory each sandbox uses. Everything it creates is
removed at the end.

    .venv/bin/python bench/sandboxes.py [--runs 10] [--parallel 50]
"""

import argparse
import statistics
import subprocess
import sys
import time
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
    parser.add_argument("--parallel", type=int, default=50)
    args = parser.parse_args()

    client = sandbox_image()
    with cocoond() as server:
        api = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=300
        )

        def create() -> str:
            response = api.post("/v1/rpc/sandbox.create", json={"network": "none"})
            assert response.status_code == 200, response.text
            return response.json()["result"]["id"]

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

    plain_median, cocoon_median = statistics.median(plain), statistics.median(cocoon)
    print(f"sequential creates, {args.runs} each, image {IMAGE}, network none\n")
    print(f"{'':<34} {'median s':>9} {'p95 s':>7}")
    print(f"{'docker run -d ... sleep infinity':<34} {plain_median:>9.3f} {percentile(plain, 0.95):>7.3f}")
    print(f"{'cocoon sandbox.create':<34} {cocoon_median:>9.3f} {percentile(cocoon, 0.95):>7.3f}")
    print(f"ratio (median): {cocoon_median / plain_median:.2f}x  (target <= 1.5x)\n")
    print(f"{args.parallel} sandboxes created in parallel: {parallel_s:.1f} s")
    print(f"cocoond RSS: {rss_before:.0f} MB before, {rss_after:.0f} MB after")
    print(f"memory per sandbox: median {statistics.median(usages):.1f} MB, max {max(usages):.1f} MB")


if __name__ == "__main__":
    main()
