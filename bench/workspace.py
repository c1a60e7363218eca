"""sandbox.diff and the archive download against the engine's own tools, in the same run.

- diff: a 10,000-file workspace (committed and tagged as the baseline) with 100 changed files;
  `sandbox.diff` over HTTP next to `docker exec <container> git diff --binary cocoon-baseline`.
- archive: a 500 MB workspace; GET /v1/sandboxes/<id>/archive next to `docker cp <container>:/workspace -`,
  with cocoond's RSS before and after (the download is streamed, not buffered).

    .venv/bin/python bench/workspace.py [--runs 5] [--archive-mb 500]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, rss_mb, sandbox_image  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--archive-mb", type=int, default=500)
    args = parser.parse_args()

    sandbox_image()
    with cocoond() as server:
        api = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=600
        )

        def call(method: str, **params: object) -> dict:
            response = api.post(f"/v1/rpc/{method}", json=params)
            assert response.status_code == 200, response.text
            return response.json()["result"]

        sandbox = call("sandbox.create", network="none", limits={"memoryMb": 4096})["id"]
        container = f"{server.instance}-{sandbox}"

        def sh(script: str) -> None:
            result = call("sandbox.exec", sandboxId=sandbox, command=["bash", "-c", script], timeoutS=600)
            assert result["exitCode"] == 0, result

        sh(
            "mkdir -p src && for d in $(seq 100); do mkdir -p src/$d; for f in $(seq 100); do "
            'echo "file $d/$f" > src/$d/$f.txt; done; done && git add -A && '
            "git commit -qm base && git tag -f cocoon-baseline >/dev/null"
        )
        sh("for d in $(seq 100); do echo changed >> src/$d/1.txt; done")

        cocoon, plain = [], []
        for _ in range(args.runs):
            started = time.perf_counter()
            result = call("sandbox.diff", sandboxId=sandbox)
            cocoon.append(time.perf_counter() - started)
            assert len(result["files"]) == 100
            started = time.perf_counter()
            subprocess.run(
                [
                    "docker",
                    "exec",
                    "-w",
                    "/workspace",
                    container,
                    "git",
                    "diff",
                    "--binary",
                    "cocoon-baseline",
                ],
                check=True,
                capture_output=True,
            )
            plain.append(time.perf_counter() - started)

        sh(f"head -c {args.archive_mb}M /dev/urandom > big.bin")
        # Both read by native clients that drop what they read (curl; the docker CLI into /dev/null), so
        # the baseline is the engine's and neither side pays for a Python reader.
        rss_before = rss_mb(server.proc.pid)
        url = f"{server.url}/v1/sandboxes/{sandbox}/archive?path=/workspace"
        started = time.perf_counter()
        curl = ["curl", "-sSf", "-o", "/dev/null", "-w", "%{size_download}", url]
        downloaded = subprocess.run(
            [*curl, "-H", f"Authorization: Bearer {server.token}"], check=True, capture_output=True
        )
        archive_s = time.perf_counter() - started
        size = int(downloaded.stdout)
        rss_after = rss_mb(server.proc.pid)
        started = time.perf_counter()
        with open(os.devnull, "wb") as devnull:
            subprocess.run(["docker", "cp", f"{container}:/workspace", "-"], check=True, stdout=devnull)
        cp_s = time.perf_counter() - started

    print(f"diff of a 10,000-file workspace with 100 changed files, {args.runs} runs each\n")
    print(f"{'':<44} {'median s':>9}")
    print(f"{'docker exec git diff --binary (CLI)':<44} {statistics.median(plain):>9.3f}")
    print(f"{'cocoon sandbox.diff (HTTP, + numstat, status)':<44} {statistics.median(cocoon):>9.3f}")
    print(f"ratio: {statistics.median(cocoon) / statistics.median(plain):.2f}x\n")
    mb, cp_rate = size / 1e6, size / 1e6 / cp_s
    print(f"archive of {mb:.0f} MB: cocoon {mb / archive_s:.0f} MB/s, docker cp {cp_rate:.0f} MB/s")
    print(f"ratio (cocoon/docker cp throughput): {cp_s / archive_s:.2f}x")
    print(f"cocoond RSS {rss_before:.0f} -> {rss_after:.0f} MB (streamed, not buffered)")


if __name__ == "__main__":
    main()
