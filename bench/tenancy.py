"""What tenancy (cocoon.tenancy) costs: lists, calls and event fan-out with ten projects on one server.

Starts its own cocoond and the bare Django view (bench/bare_django.py), makes 10 projects with 5 agent
tokens each (the 50 "users") and 20 sandbox rows per project (1,000 rows, no containers: they show as
missing), then prints
- sandbox.list for one project's token (its 20 of 1,000 rows) and for the admin (all), p50/p99;
- system.info and sandbox.get over HTTP by a project's token, against the bare view in the same run;
- events.subscribe fan-out: 50 subscribers (one per token) while sandboxes of every project are renamed:
  p50/p99 from the rename's request to each of its project's subscribers hearing it, and how many events
  reached a subscriber of another project (must be 0).

    .venv/bin/python bench/tenancy.py [--clients 50] [--requests 2000] [--renames 100] [--rounds 3]
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, daphne  # noqa: E402
from bench.rpc import drive  # noqa: E402

PROJECTS, TOKENS_EACH, SANDBOXES_EACH = 10, 5, 20

# Run in `manage.py shell` against the server's data directory: rows only, as fast as the database takes.
ROWS = """
from sandboxes.models import Sandbox
Sandbox.objects.bulk_create([
    Sandbox(name=f"{{project}}-{{n}}", image="i", network="none", cpus=1, memory_mb=64, pids=16,
            driver="docker", state="running", project_id=project, creator="bench")
    for project in {projects!r} for n in range({each})
])
"""


def percentiles(latencies: list[float]) -> tuple[float, float]:
    latencies = sorted(latencies)
    return statistics.median(latencies) * 1000, latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000


def timed_calls(url: str, token: str, body: dict, count: int) -> list[float]:
    latencies = []
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        for _ in range(count):
            begin = time.perf_counter()
            response = client.post(url, json=body)
            latencies.append(time.perf_counter() - begin)
            assert response.status_code == 200, response.text
    return latencies


def http_client(url: str, token: str | None, body: dict):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    content = json.dumps(body).encode()

    async def run(count: int, latencies: list[float]) -> None:
        async with httpx.AsyncClient(headers=headers, timeout=60) as client:
            for _ in range(count):
                begin = time.perf_counter()
                response = await client.post(url, content=content)
                latencies.append(time.perf_counter() - begin)
                assert response.status_code == 200, response.text

    return run


async def fan_out(
    server, tokens: dict[str, list[str]], sandboxes: dict[str, list[str]], renames: int
) -> dict:
    """Rename sandboxes of every project in turn while each token listens; latencies and strays."""
    sent: dict[str, tuple[str, float]] = {}  # new name -> (project, when its rename was asked for)
    latencies: list[float] = []
    strays = 0
    expected = renames * TOKENS_EACH
    heard = asyncio.Event()

    async def listen(project: str, token: str, ready: asyncio.Event) -> None:
        nonlocal strays
        headers = {"Authorization": f"Bearer {token}"}
        async with connect(f"ws://127.0.0.1:{server.port}/v1/ws", additional_headers=headers) as ws:
            await ws.send(
                json.dumps({"id": 1, "method": "events.subscribe", "params": {"types": ["sandbox.updated"]}})
            )
            assert "result" in json.loads(await ws.recv())
            ready.set()
            while True:
                frame = json.loads(await ws.recv())
                name = frame["event"]["data"]["name"]
                if name not in sent:  # reconcile finding the rows' containers missing
                    continue
                owner, asked = sent[name]
                if owner != project:
                    strays += 1
                latencies.append(time.perf_counter() - asked)
                if len(latencies) + strays >= expected:
                    heard.set()

    readies = []
    listeners = []
    for project, project_tokens in tokens.items():
        for token in project_tokens:
            ready = asyncio.Event()
            readies.append(ready)
            listeners.append(asyncio.create_task(listen(project, token, ready)))
    await asyncio.gather(*(ready.wait() for ready in readies))
    projects = list(tokens)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}, timeout=60) as client:
        for number in range(renames):
            project = projects[number % len(projects)]
            name = f"renamed-{number}"
            sandbox_id = sandboxes[project][number % SANDBOXES_EACH]
            sent[name] = (project, time.perf_counter())
            response = await client.post(
                f"{server.url}/v1/rpc/sandbox.rename", json={"sandboxId": sandbox_id, "name": name}
            )
            assert response.status_code == 200, response.text
    try:
        await asyncio.wait_for(heard.wait(), timeout=60)
    except TimeoutError:
        failed = [listener.exception() for listener in listeners if listener.done()]
        raise SystemExit(
            f"heard {len(latencies)} of {expected} events, {strays} strays; listeners failed: {failed}"
        ) from None
    finally:
        for listener in listeners:
            listener.cancel()
    p50, p99 = percentiles(latencies)
    return {"events": len(latencies), "strays": strays, "p50": p50, "p99": p99}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--renames", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with daphne("bench.bare_django:application") as bare_port, cocoond() as server:
        projects = [f"p{n}" for n in range(PROJECTS)]
        tokens: dict[str, list[str]] = {}
        for project in projects:
            server.call("projects.create", {"id": project, "name": project})
            tokens[project] = [
                server.call(
                    "tokens.create", {"name": f"{project}-{n}", "scope": "agent", "project": project}
                )["token"]
                for n in range(TOKENS_EACH)
            ]
        script = ROWS.format(projects=projects, each=SANDBOXES_EACH)
        environment = os.environ | {"COCOON_DATA": str(server.data)}
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=environment, check=True
        )
        sandboxes: dict[str, list[str]] = {}
        for project in projects:
            sandboxes[project] = [
                each["id"] for each in server.call("sandbox.list", token=tokens[project][0])
            ]
            assert len(sandboxes[project]) == SANDBOXES_EACH, len(sandboxes[project])

        member, rpc = tokens[projects[0]][0], f"{server.url}/v1/rpc"
        one = {"sandboxId": sandboxes[projects[0]][0]}
        lists = {
            "sandbox.list, a project's token (20 of 1,000)": timed_calls(
                f"{rpc}/sandbox.list", member, {}, 200
            ),
            "sandbox.list, the admin (all 1,000)": timed_calls(f"{rpc}/sandbox.list", server.token, {}, 50),
            "sandbox.get, a project's token, one at a time": timed_calls(
                f"{rpc}/sandbox.get", member, one, 300
            ),
            "sandbox.get, the admin, one at a time": timed_calls(
                f"{rpc}/sandbox.get", server.token, one, 300
            ),
        }
        targets = {
            "bare Django view (HTTP)": http_client(
                f"http://127.0.0.1:{bare_port}/v1/rpc/system.info", None, {}
            ),
            "system.info, a project's token": http_client(f"{rpc}/system.info", member, {}),
            "system.info, the admin": http_client(f"{rpc}/system.info", server.token, {}),
            "sandbox.get, a project's token": http_client(f"{rpc}/sandbox.get", member, one),
            "sandbox.get, the admin": http_client(f"{rpc}/sandbox.get", server.token, one),
        }
        for client in targets.values():
            asyncio.run(drive(min(args.clients, 10), 200, client))  # warm-up
        # Rounds in a turning order, each target's median round: one that ran last (a warmer pool, a
        # quieter machine) is not taken for a cheaper one.
        rounds: dict[str, list[dict]] = {name: [] for name in targets}
        for turn in range(args.rounds):
            names = list(targets)
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                rounds[name].append(asyncio.run(drive(args.clients, args.requests, targets[name])))
        results = {
            name: sorted(runs, key=lambda run: run["rps"])[len(runs) // 2] for name, runs in rounds.items()
        }
        fanned = asyncio.run(fan_out(server, tokens, sandboxes, args.renames))

    print(
        f"{PROJECTS} projects x {TOKENS_EACH} tokens x {SANDBOXES_EACH} sandbox rows, same machine and run\n"
    )
    for name, latencies in lists.items():
        p50, p99 = percentiles(latencies)
        print(f"{name:<48} p50 {p50:6.1f} ms  p99 {p99:6.1f} ms")
    baseline = results["bare Django view (HTTP)"]["rps"]
    print(
        f"\n{args.clients} concurrent clients, {args.requests} requests a round,"
        f" the median of {args.rounds} rounds"
    )
    print(f"{'target':<34} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'req/s vs bare':>14}")
    for name, result in results.items():
        print(
            f"{name:<34} {result['rps']:>8.0f} {result['p50']:>8.1f} {result['p99']:>8.1f}"
            f" {result['rps'] / baseline:>13.2f}x"
        )
    print(
        f"\nfan-out to {PROJECTS * TOKENS_EACH} subscribers of {PROJECTS} projects, {args.renames} renames:"
        f" {fanned['events']} events heard by their own project's subscribers, p50 {fanned['p50']:.1f} ms,"
        f" p99 {fanned['p99']:.1f} ms; heard outside their project: {fanned['strays']}"
    )


if __name__ == "__main__":
    main()
