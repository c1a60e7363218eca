"""RPC throughput and latency of system.info: HTTP and WebSocket against a bare Django view.

Starts its own cocoond and a bare Django app on Daphne (both on loopback, access logs off), drives each
with the same number of concurrent clients, and prints requests/s, p50/p99 latency and the ratio to the
bare view measured in the same run.

    .venv/bin/python bench/rpc.py [--clients 100] [--requests 3000]
"""

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, daphne  # noqa: E402


async def drive(clients: int, total: int, one_client: Callable[[int, list[float]], Awaitable[None]]) -> dict:
    latencies: list[float] = []
    per_client = total // clients
    started = time.perf_counter()
    await asyncio.gather(*(one_client(per_client, latencies) for _ in range(clients)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "count": len(latencies),
    }


def http_client(url: str, token: str | None) -> Callable[[int, list[float]], Awaitable[None]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def run(count: int, latencies: list[float]) -> None:
        async with httpx.AsyncClient(headers=headers, timeout=60) as client:
            for _ in range(count):
                begin = time.perf_counter()
                response = await client.post(url, content=b"{}")
                latencies.append(time.perf_counter() - begin)
                assert response.status_code == 200, response.text

    return run


def ws_client(url: str, token: str) -> Callable[[int, list[float]], Awaitable[None]]:
    async def run(count: int, latencies: list[float]) -> None:
        async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            for call_id in range(count):
                begin = time.perf_counter()
                await ws.send(json.dumps({"id": call_id, "method": "system.info", "params": {}}))
                frame = json.loads(await ws.recv())
                latencies.append(time.perf_counter() - begin)
                assert "result" in frame, frame
                assert frame["id"] == call_id

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()

    with daphne("bench.bare_django:application") as bare_port, cocoond() as server:
        rpc = f"{server.url}/v1/rpc/system.info"
        targets = {
            "bare Django view (HTTP)": http_client(f"http://127.0.0.1:{bare_port}/v1/rpc/system.info", None),
            "cocoon system.info (HTTP)": http_client(rpc, server.token),
            "cocoon system.info (WS)": ws_client(f"ws://127.0.0.1:{server.port}/v1/ws", server.token),
        }
        results = {}
        for name, client in targets.items():
            asyncio.run(drive(min(args.clients, 10), 200, client))  # warm-up
            results[name] = asyncio.run(drive(args.clients, args.requests, client))

    baseline = results["bare Django view (HTTP)"]
    print(
        f"{args.clients} concurrent clients, {args.requests} requests each target, same machine, same run\n"
    )
    print(f"{'target':<28} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'req/s vs bare':>14}")
    for name, result in results.items():
        ratio = result["rps"] / baseline["rps"]
        print(f"{name:<28} {result['rps']:>8.0f} {result['p50']:>8.1f} {result['p99']:>8.1f} {ratio:>13.2f}x")


if __name__ == "__main__":
    main()
