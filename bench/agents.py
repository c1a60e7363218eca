"""Agents next to baselines measured in the same run, on a cocoond of its own:

- agent.spawn (shell profile) against a bare `docker exec -u agent <ctr> tmux new-session -d` (docker CLI);
- hook to event: cocoon-status runs in the sandbox -> agent.updated reaches a WebSocket client; the
  baseline is the poller's tick (the event can only come with the next poll);
- poller CPU per tick with 1, 10 and 50 sandboxes (one shell agent each): cocoond's CPU time, and the
  Docker engine's (dockerd + containerd + shims, with the runc processes they reaped) that the execs
  cost, less an idle window without agents; whatever else runs on the machine adds to both;
- keystroke echo over the attach WebSocket against `docker exec -it <ctr> tmux attach` through a pty.

- one agent printing without pause (`yes`): cocoond's and the engine's CPU above idle, and the hook
  latency of another agent meanwhile.

Status comes from the watcher (agents.watch) unless --poll-only (COCOON_WATCH_AGENTS=0): run both to
compare the push against the poller it replaces.

    .venv/bin/python bench/agents.py [--runs 20] [--sandboxes 1,10,50] [--window 20] [--poll-only]
"""

import argparse
import os
import pty
import random
import select
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, sandbox_image  # noqa: E402
from bench.sandboxes import percentile  # noqa: E402

TICK_S = 2.0  # agents.tasks.poll in cocoon/celery.py
ECHO_LETTERS = [b"Q", b"R", b"U", b"V", b"W", b"Y"]
ENGINE = {"dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2"}


def row(name: str, values: list[float], unit: str = "ms", scale: float = 1000) -> None:
    median, p95 = statistics.median(values) * scale, percentile(values, 0.95) * scale
    print(f"{name:<52} {median:>9.1f} {p95:>9.1f} {unit}")


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        # utime + stime, and cutime + cstime: the exec's short-lived runc processes, once reaped.
        total += sum(int(value) for value in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def engine_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ENGINE:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--sandboxes", default="1,10,50")
    parser.add_argument("--window", type=float, default=20, help="seconds of polling measured per level")
    parser.add_argument("--poll-only", action="store_true", help="no watcher: status from the 2 s poll")
    args = parser.parse_args()
    levels = [int(level) for level in args.sandboxes.split(",")]

    client = sandbox_image()
    with cocoond(COCOON_WATCH_AGENTS="0" if args.poll_only else "1") as server:
        source = "the poller alone" if args.poll_only else "the watcher (the poller as safety net)"
        print(f"status from {source}")

        def call(method: str, **params):
            return server.call(method, params)

        sandbox = call("sandbox.create", network="none")
        container = f"{server.instance}-{sandbox['id']}"
        print(f"{'':<52} {'median':>9} {'p95':>9}")

        # -- spawn ---------------------------------------------------------------------------------
        # Over one kept-alive connection, as a client that makes more than one call does (the bench's
        # call() builds an HTTP client per call: 30-40 ms of TLS context and a new connection).
        keep = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=60
        )
        bare, spawned, kept = [], [], []
        for index in range(args.runs):
            started = time.perf_counter()
            subprocess.run(
                ["docker", "exec", "-u", "agent", container, "tmux", "-L", "bench", "new-session", "-d",
                 "-s", f"b{index}", "-x", "120", "-y", "40", "bash", "-l"],
                check=True,
            )  # fmt: skip
            bare.append(time.perf_counter() - started)
            started = time.perf_counter()
            spawned.append(call("agent.spawn", sandboxId=sandbox["id"], profile="shell")["id"])
            spawned[-1] = (spawned[-1], time.perf_counter() - started)
            started = time.perf_counter()
            answer = keep.post("/v1/rpc/agent.spawn", json={"sandboxId": sandbox["id"], "profile": "shell"})
            kept.append((answer.json()["result"]["id"], time.perf_counter() - started))
        subprocess.run(["docker", "exec", "-u", "agent", container, "tmux", "-L", "bench", "kill-server"])
        row("docker exec ... tmux new-session -d", bare)
        row("agent.spawn (shell), a new HTTP client per call", [seconds for _id, seconds in spawned])
        row("agent.spawn (shell), one kept-alive connection", [seconds for _id, seconds in kept])
        for name, times in (("new client", spawned), ("kept-alive", kept)):
            ratio = statistics.median([seconds for _id, seconds in times]) / statistics.median(bare)
            print(f"ratio (median), {name}: {ratio:.2f}x")
        print()
        for agent_id, _seconds in spawned + kept:
            call("agent.kill", agentId=agent_id)
        keep.close()

        # -- hook to event -------------------------------------------------------------------------
        agent = _hooked_agent(call, sandbox["id"])
        time.sleep(2 * TICK_S)  # its sandbox's stream is up
        hook_latency = _hook_latencies(server, container, agent["id"], args.runs)
        exec_only = []
        for _ in range(args.runs):
            started = time.time()
            subprocess.run(["docker", "exec", "-u", "agent", container, "true"], check=True)
            exec_only.append(time.time() - started)
        row("poller tick (the wait an event can have)", [TICK_S], scale=1000)
        row("docker exec ... true (how the bench runs the hook)", exec_only)
        row("hook fires -> agent.updated on the WebSocket", hook_latency)
        beyond = [latency - statistics.median(exec_only) for latency in hook_latency]
        row("  the same, less the docker exec", beyond)
        print(f"ratio (median) to half a tick: {statistics.median(hook_latency) / (TICK_S / 2):.2f}x\n")

        # -- keystroke echo ------------------------------------------------------------------------
        # One viewer at a time (tmux draws every keystroke to each client attached). The engine's exec
        # socket read straight from Python is what cocoond's own path costs without the WebSocket.
        shell = call("agent.spawn", sandboxId=sandbox["id"], profile="shell")
        call("agent.wait", agentId=shell["id"], until=["idle"], timeoutS=30)
        url = f"ws://127.0.0.1:{server.port}/v1/agents/{shell['id']}/attach?token={server.token}"
        with connect(url, open_timeout=10) as ws:
            time.sleep(0.5)
            while _drain(lambda: ws.recv(timeout=0.2)):
                pass
            attach = _echo_times(args.runs, lambda data: ws.send(data), lambda: ws.recv(timeout=5))
        tmux_attach = ["tmux", "-L", "cocoon", "attach", "-t", f"={shell['id']}"]
        primary, secondary = pty.openpty()
        proc = subprocess.Popen(
            ["docker", "exec", "-it", "-u", "agent", container, *tmux_attach],
            stdin=secondary, stdout=secondary, stderr=secondary, close_fds=True,
        )  # fmt: skip
        os.close(secondary)
        docker_it = _echo_times(args.runs, lambda data: os.write(primary, data), _settled(primary, os.read))
        proc.terminate()
        proc.wait()
        os.close(primary)
        exec_id = client.api.exec_create(container, tmux_attach, stdin=True, tty=True, user="agent")["Id"]
        engine = client.api.exec_start(exec_id, socket=True, tty=True)._sock
        engine_socket = _echo_times(
            args.runs, engine.sendall, _settled(engine.fileno(), lambda _fd, n: engine.recv(n))
        )
        engine.close()
        row("docker exec -it ... tmux attach (pty): echo", docker_it)
        row("  the engine's exec socket, from Python: echo", engine_socket)
        row("WS /v1/agents/<id>/attach: echo", attach)
        median = statistics.median(attach) / statistics.median(docker_it)
        p95 = percentile(attach, 0.95) / percentile(docker_it, 0.95)
        print(f"ratio (median): {median:.2f}x, p95 {p95:.2f}x\n")

        def measure() -> tuple[float, float]:
            # The same processes at both ends: one that ends in between would take its time with it.
            cocoon_pids, engine = [server.proc.pid], engine_pids()
            before = (cpu_seconds(cocoon_pids), cpu_seconds(engine))
            time.sleep(args.window)
            return cpu_seconds(cocoon_pids) - before[0], cpu_seconds(engine) - before[1]

        # -- one agent printing without pause ------------------------------------------------------
        call("agent.kill", agentId=shell["id"])
        quiet = measure()  # the hooked agent alone, idle
        flood = call("agent.spawn", sandboxId=sandbox["id"], profile="shell")
        call("agent.wait", agentId=flood["id"], until=["idle"], timeoutS=30)
        call("agent.send_input", agentId=flood["id"], text="yes")
        time.sleep(2)
        loud = measure()
        flood_hooks = _hook_latencies(server, container, agent["id"], 8)
        call("agent.kill", agentId=flood["id"])
        call("agent.kill", agentId=agent["id"])
        cocoon_pct, engine_pct = ((loud[i] - quiet[i]) / args.window * 100 for i in (0, 1))
        print(f"one agent running `yes`: cocoond {cocoon_pct:.1f} %, engine {engine_pct:.1f} % of a core")
        row("  meanwhile, another agent's hook -> agent.updated", flood_hooks)
        print()

        # -- poller cost ---------------------------------------------------------------------------
        call("sandbox.delete", sandboxId=sandbox["id"])
        time.sleep(TICK_S)
        idle = measure()
        ticks = args.window / TICK_S
        print(f"poller, {ticks:.0f} ticks of {TICK_S:.0f} s per level; CPU ms per tick above an idle cocoond")
        print(
            f"  idle (no agents): cocoond {idle[0] / ticks * 1000:.1f}, engine {idle[1] / ticks * 1000:.1f}"
        )
        print("  (and hook -> event latency with the poller that busy: a probe agent in the first sandbox)")
        sandboxes: list[str] = []
        probe = None
        for level in levels:
            with ThreadPoolExecutor(8) as pool:
                sandboxes += pool.map(lambda _: _sandbox_with_agent(call), range(level - len(sandboxes)))
            probe = probe or _hooked_agent(call, sandboxes[0])
            time.sleep(3 * TICK_S)  # the agents settle, their first screens are read
            used = measure()
            probe_latency = _hook_latencies(server, f"{server.instance}-{sandboxes[0]}", probe["id"], 8)
            cocoon_ms = (used[0] - idle[0]) / ticks * 1000
            engine_ms = (used[1] - idle[1]) / ticks * 1000
            hook = (
                f"median {statistics.median(probe_latency) * 1000:.0f}, max {max(probe_latency) * 1000:.0f}"
            )
            cocoon_cost = f"cocoond {cocoon_ms:7.1f} ({cocoon_ms / level:5.1f}/sandbox)"
            engine_cost = f"engine {engine_ms:7.1f} ({engine_ms / level:5.1f}/sandbox)"
            print(f"  {level:>3} sandboxes: {cocoon_cost}, {engine_cost}; hook->event {hook} ms")
        client.close()


def _hooked_agent(call, sandbox_id: str) -> dict:
    """A claude-code agent whose `claude` is a stand-in that just stays in the foreground: only its
    hook reports change its status."""
    stand_in = (
        "mkdir -p ~/bin && printf '#!/bin/sh\\nexec sleep 100000\\n' > ~/bin/claude && chmod +x ~/bin/claude"
    )
    call("sandbox.exec", sandboxId=sandbox_id, command=["sh", "-c", stand_in])
    path = "/home/agent/bin:/opt/cocoon/bin:/usr/bin:/bin"
    return call("agent.spawn", sandboxId=sandbox_id, profile="claude-code", env={"PATH": path})


def _hook_latencies(server, container: str, agent_id: str, runs: int) -> list[float]:
    """Seconds from running cocoon-status in the sandbox to its agent.updated on a WebSocket."""
    latencies = []
    with server.ws() as ws:
        ws.call("events.subscribe", {"types": ["agent.updated"], "agentId": agent_id})
        for index in range(runs):
            status = ("done", "blocked")[index % 2]
            started = time.time()
            subprocess.run(
                ["docker", "exec", "-u", "agent", "-e", f"COCOON_AGENT_ID={agent_id}", container,
                 "/opt/cocoon/bin/cocoon-status", status],
                check=True,
            )  # fmt: skip
            while True:
                event = ws.next_event(timeout=60)["event"]
                if event["data"]["status"] == status and event["data"]["statusSource"] == "hook":
                    break
            latencies.append(time.time() - started)
            time.sleep(random.uniform(0, TICK_S))  # land anywhere in the poller's tick
    return latencies


def _sandbox_with_agent(call) -> str:
    sandbox = call("sandbox.create", network="none")
    call("agent.spawn", sandboxId=sandbox["id"], profile="shell")
    return sandbox["id"]


def _drain(receive) -> bool:
    try:
        receive()
    except TimeoutError:
        return False
    return True


def _settled(fd: int, read):
    """A receive for _echo_times from a terminal just attached: what it drew first is read away."""
    time.sleep(1.5)
    while select.select([fd], [], [], 0.2)[0]:
        read(fd, 65536)

    def receive() -> bytes:
        if not select.select([fd], [], [], 5)[0]:
            raise TimeoutError("no echo")
        return read(fd, 65536)

    return receive


def _echo_times(runs: int, send, receive) -> list[float]:
    """Type one letter at a time and time until the terminal shows it; clear the line at the end.
    The letters are ones that never end an escape sequence, so a redraw is never taken for the echo."""
    times = []
    for index in range(runs):
        letter = ECHO_LETTERS[index % len(ECHO_LETTERS)]
        started = time.perf_counter()
        send(letter)
        seen = b""
        while letter not in seen:
            seen += receive()
        times.append(time.perf_counter() - started)
        time.sleep(0.05)
    send(b"\x15")  # C-u
    return times


if __name__ == "__main__":
    main()
