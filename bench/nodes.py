"""Several hosts, each figure next to a baseline measured in the same run: two engines of their own in
network namespaces (tests/nodes.py), reached over mutual TLS, added as nodes to a cocoond of its own.

- sandbox.create (network none, then egress) on a remote node vs on the local node: p50/p95 and the
  ratio (--runs each, interleaved; the remote node already has the images, their first shipping is
  reported apart; an egress create waits until the node's proxy has loaded the new policy);
- placement of --place sandboxes over the three nodes (spread, capacity in proportion 3:2:1): wall
  time, how they spread, and how far from proportional;
- cocoond's CPU with --agents idle shell agents on the remote nodes, per 100 agents, against the same
  number on the local node (--window seconds each).

Needs root (network namespaces, a dockerd per node). Everything it makes is removed at the end.

    .venv/bin/python bench/nodes.py [--runs 20] [--place 150] [--agents 50] [--window 30]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cocoon.settings")

from bench.agents import cpu_seconds  # noqa: E402
from bench.harness import IMAGE, cocoond, in_parallel, sandbox_image  # noqa: E402
from bench.sandboxes import percentile  # noqa: E402
from tests.nodes import remote_engine  # noqa: E402

LIMITS = {"cpus": 0.25, "memoryMb": 128, "pids": 128}


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def creates(call: Callable, runs: int, network: str) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"local": [], "na": []}
    made = []
    for _ in range(runs):
        for node in times:
            params = {"network": network, "image": IMAGE, "limits": LIMITS, "node": node}
            times[node].append(timed(lambda params=params: made.append(call("sandbox.create", **params))))
    in_parallel(lambda sandbox: call("sandbox.delete", sandboxId=sandbox["id"]), made)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--place", type=int, default=150)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--window", type=float, default=30)
    args = parser.parse_args()
    sandbox_image()
    run, root = os.getpid() % 250, Path(tempfile.mkdtemp(prefix="cocoon-bench-nodes-"))
    with (
        remote_engine("na", f"10.252.{run}", root / "na") as first,
        remote_engine("nb", f"10.253.{run}", root / "nb") as second,
        cocoond() as server,
    ):

        def call(method: str, **params: object) -> object:
            return server.call(method, params)

        nodes = {"local": "nd_local"}
        for engine in (first, second):
            nodes[engine.name] = call("node.add", name=engine.name, url=engine.url, tls=engine.tls())["id"]

        # -- create ------------------------------------------------------------------------------
        firsts = {}
        for name in ("na", "nb"):  # each node's first create ships the image to it
            made: list = []
            params = {"network": "none", "image": IMAGE, "limits": LIMITS, "node": name}
            firsts[name] = timed(
                lambda params=params, made=made: made.append(call("sandbox.create", **params))
            )
            call("sandbox.delete", sandboxId=made[0]["id"])
        for network in ("none", "egress"):
            if network == "egress":  # the first egress create ships the proxy's image and starts it
                made = []
                params = {"network": network, "image": IMAGE, "limits": LIMITS, "node": "na"}
                firsts["na, its egress proxy"] = timed(
                    lambda params=params, made=made: made.append(call("sandbox.create", **params))
                )
                call("sandbox.delete", sandboxId=made[0]["id"])
            times = creates(call, args.runs, network)
            print(f"sandbox.create, network {network}, {args.runs} each (interleaved)")
            for node, values in times.items():
                p50, p95 = statistics.median(values) * 1000, percentile(values, 0.95) * 1000
                print(f"  {node:<6} p50 {p50:7.0f} ms  p95 {p95:7.0f} ms")
            ratio50 = statistics.median(times["na"]) / statistics.median(times["local"])
            ratio95 = percentile(times["na"], 0.95) / percentile(times["local"], 0.95)
            print(f"  remote / local: p50 {ratio50:.2f}x, p95 {ratio95:.2f}x")
        shipped = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in firsts.items())
        print(f"  a node's first create, with the images shipped to it (docker save -> load): {shipped}")

        # -- placement ---------------------------------------------------------------------------
        room = {"cpus": 10_000, "memoryMb": 10_000_000}
        shares = {"local": 3, "na": 2, "nb": 1}
        for name, share in shares.items():
            call("node.update", nodeId=nodes[name], capacity=room | {"maxSandboxes": share * args.place})
        started = time.perf_counter()
        placed = in_parallel(
            lambda _i: call("sandbox.create", network="none", image=IMAGE, limits=LIMITS),
            range(args.place),
            workers=6,
        )
        elapsed = time.perf_counter() - started
        names = {node_id: name for name, node_id in nodes.items()}
        spread = Counter(names[sandbox["node"]] for sandbox in placed)
        expected = {name: args.place * share / sum(shares.values()) for name, share in shares.items()}
        off = max(abs(spread[name] - expected[name]) for name in shares)
        print(
            f"\nplacement of {args.place} sandboxes over 3 nodes (capacity 3:2:1, spread, 6 at a time): "
            f"{elapsed:.1f} s ({args.place / elapsed:.1f}/s); "
            + ", ".join(f"{name} {spread[name]} (proportional {expected[name]:.0f})" for name in shares)
            + f"; furthest off proportional: {off:.0f}"
        )
        in_parallel(lambda sandbox: call("sandbox.delete", sandboxId=sandbox["id"]), placed)
        for name in shares:
            call("node.update", nodeId=nodes[name], capacity={})

        # -- control-plane CPU per 100 idle agents -----------------------------------------------
        def idle_agents(where: list[str]) -> float:
            sandboxes = [
                call("sandbox.create", network="none", image=IMAGE, limits=LIMITS, node=where[i % len(where)])
                for i in range(args.agents)
            ]
            agents = in_parallel(
                lambda sandbox: call("agent.spawn", sandboxId=sandbox["id"], profile="shell"), sandboxes
            )
            for agent in agents:
                call("agent.wait", agentId=agent["id"], until=["idle"], timeoutS=60)
            time.sleep(10)  # watchers opened, first screens read
            before = cpu_seconds([server.proc.pid])
            time.sleep(args.window)
            used = cpu_seconds([server.proc.pid]) - before
            in_parallel(lambda sandbox: call("sandbox.delete", sandboxId=sandbox["id"]), sandboxes)
            return used / args.window * 100 / args.agents * 100  # % of a core per 100 agents

        local = idle_agents(["local"])
        remote = idle_agents(["na", "nb"])
        print(
            f"\ncocoond CPU, {args.agents} idle shell agents, per 100 agents: remote nodes {remote:.1f} % "
            f"of a core, local node {local:.1f} % (ratio {remote / local:.2f}x)"
        )


if __name__ == "__main__":
    main()
