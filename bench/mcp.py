"""MCP against plain RPC: `tools/list` and a `sandbox_list` tool call over the official SDK client,
next to `POST /v1/rpc/system.methods` and `POST /v1/rpc/sandbox.list`, in the same run.

    .venv/bin/python bench/mcp.py [--runs 200]
"""

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

# Run as a script, this folder comes first on sys.path, where this file would shadow the `mcp` SDK.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

import httpx  # noqa: E402
import httpx2  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond  # noqa: E402


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95) - 1] * 1000


async def measure(url: str, token: str, runs: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {
        "tools/list": [],
        "tools/call sandbox_list": [],
        "rpc system.methods": [],
        "rpc sandbox.list": [],
    }
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
        httpx.AsyncClient(headers=headers, timeout=60) as rpc,
    ):
        await session.initialize()
        for _ in range(runs):
            for name, action in (
                ("tools/list", session.list_tools),
                ("tools/call sandbox_list", lambda: session.call_tool("sandbox_list", {})),
                ("rpc system.methods", lambda: rpc.post(f"{url}/v1/rpc/system.methods", content=b"{}")),
                ("rpc sandbox.list", lambda: rpc.post(f"{url}/v1/rpc/sandbox.list", content=b"{}")),
            ):
                started = time.perf_counter()
                await action()
                results[name].append(time.perf_counter() - started)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with cocoond() as server:
        results = asyncio.run(measure(server.url, server.token, args.runs))
    print(f"{args.runs} sequential calls each, one client, same run\n")
    print(f"{'':<26} {'median ms':>10} {'p95 ms':>8}")
    for name, samples in results.items():
        median, p95 = summary(samples)
        print(f"{name:<26} {median:>10.1f} {p95:>8.1f}")
    ratio_list = summary(results["tools/list"])[0] / summary(results["rpc system.methods"])[0]
    ratio_call = summary(results["tools/call sandbox_list"])[0] / summary(results["rpc sandbox.list"])[0]
    print(f"\nratio tools/list : system.methods = {ratio_list:.2f}x")
    print(f"ratio sandbox_list tool : sandbox.list = {ratio_call:.2f}x")


if __name__ == "__main__":
    main()
