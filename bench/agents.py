"""Agents next to baselines measured in the same run, on a cocoond of its own:

- agent.spawn (shell profile) against a bare `docker exec -u agent <ctr> tmux new-session -d` (docker CLI);
- hook to event: cocoon-status runs in the sandbox -> agent.updated reaches a WebSocket client; the
  baseline is the poller's tick (the event can only come with the next poll);
- per level of 1, 10, 50, 100 and 200 sandboxes: cocoond's CPU time and the Docker engine's (dockerd +
  containerd + shims, with the runc processes they reaped) over a window with the sandboxes and no
  agents, then with one idle shell agent in each once they have settled (no exec for SETTLED_S: the
  spawns' own cost is not an idle agent's), and the difference; whatever else runs on the machine
  adds to both. Meanwhile hook -> event and screen -> event in the first sandbox, and system.info
  called 5 times a second over a kept-alive connection;
- keystroke echo over the attach WebSocket against `docker exec -it <ctr> tmux attach` through a pty.

- one agent printing without pause (`yes`): cocoond's and the engine's CPU above idle, and the hook
  latency of another agent meanwhile;
- at the end, each row of the issue's table (#16) with the figure measured here and its target.

Status comes from the watcher (agents.watch) unless --poll-only (COCOON_WATCH_AGENTS=0): run both to
compare the push against the poller it replaces.

Every sandbox it made is removed at the end, also after a failure or Ctrl-C (bench.harness.cocoond).

    .venv/bin/python bench/agents.py [--runs 20] [--sandboxes 1,10,50,100,200] [--window 20] [--poll-only]
"""

import argparse
import math
import os
import pty
import random
import select
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import docker
import httpx
from websockets.client import ClientProtocol
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, daphne, in_parallel, sandbox_image  # noqa: E402
from bench.sandboxes import percentile  # noqa: E402

TICK_S = 2.0  # agents.tasks.poll in cocoon/celery.py
ECHO_LETTERS = [b"Q", b"R", b"U", b"V", b"W", b"Y"]
ENGINE = {"dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2"}
INFO_PER_S = 5  # system.info calls a second while a level runs
# The agents of a level have settled (spawns done, streams opened, first screens read) once the engine
# has run no exec in the bench's sandboxes for this long: the window then measures idle agents.
SETTLED_S = 10
SETTLE_MAX_S = 180


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
    parser.add_argument("--sandboxes", default="1,10,50,100,200")
    parser.add_argument("--window", type=float, default=20, help="seconds of CPU measured per window")
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
        agent = _quiet_agent(call, sandbox["id"])
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
        with OneThreadClient(url) as ws:
            time.sleep(0.5)
            while _drain(lambda: ws.recv(timeout=0.2)):
                pass
            attach = _echo_times(args.runs, ws.send, ws.recv)
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
        relay = _bare_attach(container, shell["id"], args.runs)
        row("docker exec -it ... tmux attach (pty): echo", docker_it)
        row("  the engine's exec socket, from Python: echo", engine_socket)
        row("  a bare ASGI relay on Daphne (bench/bare_attach.py)", relay)
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

        # -- levels ------------------------------------------------------------------------------------
        call("sandbox.delete", sandboxId=sandbox["id"])
        levels_measured = _levels(server, call, measure, levels, args.runs, args.window)

        # -- the table ---------------------------------------------------------------------------
        largest = levels_measured[-1]
        cpu = next((level for level in levels_measured if level.sandboxes == 100), largest)
        first = levels_measured[0]
        exec_ms = statistics.median(exec_only) * 1000
        ratios = [statistics.median([s for _id, s in t]) / statistics.median(bare) for t in (kept, spawned)]
        table = [
            (
                f"engine CPU, {cpu.sandboxes} sandboxes with one idle shell agent",
                f"{cpu.percent(cpu.agents[1]):.1f} % of a core, {cpu.percent(cpu.bare[1]):.1f} % with no "
                f"agents: {cpu.percent(cpu.above[1]):+.1f} % (cocoond {cpu.percent(cpu.above[0]):+.1f} %)",
                "<= 5 % of a core above the no-agent baseline, 100 idle agents",
            ),
            (
                "hook report -> agent.updated on a WebSocket",
                f"{_p50_p99(hook_latency)} ms, {_p50_p99(beyond)} less the exec ({exec_ms:.0f} ms); "
                f"{largest.sandboxes} sandboxes: {_p50_p99(largest.hook)}",
                "p50 <= 100 ms, p99 <= 300 ms",
            ),
            (
                "screen change -> event (agent.updated)",
                f"{first.sandboxes} sandboxes: {_p50_p99(first.screen)} ms; "
                f"{largest.sandboxes}: {_p50_p99(largest.screen)}",
                "p50 <= 250 ms",
            ),
            (
                "agent.spawn vs docker exec tmux new-session -d",
                f"{ratios[0]:.2f}x kept-alive ({ratios[1]:.2f}x a new client per call)",
                "<= 1.3x",
            ),
            (
                "attach keystroke echo vs docker exec -it tmux",
                f"{statistics.median(attach) / statistics.median(docker_it):.2f}x"
                f" (a bare relay on Daphne {statistics.median(relay) / statistics.median(docker_it):.2f}x)",
                "<= 1.2x",
            ),
            (
                "one agent printing without pause (yes)",
                f"engine {engine_pct:.1f} % + cocoond {cocoon_pct:.1f} %; another agent's hook "
                f"{_p50_p99(flood_hooks)} ms (quiet: {_p50_p99(hook_latency)})",
                "cocoond <= 5 %, engine <= 10 %; others' latency unchanged",
            ),
            (
                "bench at many sandboxes",
                f"{largest.sandboxes} sandboxes with agents; system.info {_p50_p99(largest.info)} ms"
                f" (while they spawned: {_p50_p99(largest.spawning)})"
                + (f", {largest.failed} failed" if largest.failed else ""),
                "200 sandboxes with agents; system.info p99 < 200 ms",
            ),
        ]
        print(f"\nthe table of #16 (p50/p99 in ms; % of a core)\n{'figure':<50} {'now':<80} target")
        for figure, now, target in table:
            print(f"{figure:<50} {now:<80} {target}")
        client.close()


@dataclass
class Level:
    """One level's figures: CPU seconds over a window as (cocoond, engine), latencies in seconds."""

    sandboxes: int
    window: float
    bare: tuple[float, float]  # the sandboxes, no agents
    agents: tuple[float, float]  # the same, one idle shell agent each
    hook: list[float]
    screen: list[float]
    info: list[float]  # system.info calls that answered, but for those ...
    spawning: list[float]  # ... while the agents spawned and settled
    failed: int  # system.info calls that did not

    @property
    def above(self) -> tuple[float, float]:
        """What the agents cost: with them less without."""
        return self.agents[0] - self.bare[0], self.agents[1] - self.bare[1]

    def percent(self, seconds: float) -> float:
        """CPU seconds over the window as % of a core."""
        return seconds / self.window * 100


def _levels(
    server, call, measure: Callable[[], tuple[float, float]], levels: list[int], runs: int, window: float
) -> list[Level]:
    """Each level: its sandboxes without agents, then with one idle shell agent each, then the probes;
    the agents are killed before the next level, so that its baseline has none."""
    ticks = window / TICK_S
    print(f"per level, {ticks:.0f} ticks of {TICK_S:.0f} s per window; CPU in ms per tick and % of a core,")
    print("hook and screen -> agent.updated in the first sandbox, system.info called "
          f"{INFO_PER_S}/s throughout (p50/p99, ms)")  # fmt: skip
    print(f"{'':<34} {'cocoond ms':>10} {'%':>6} {'engine ms':>10} {'%':>6}")

    def cost(name: str, seconds: tuple[float, float], per: int = 1) -> None:
        cocoon_s, engine_s = (value / per for value in seconds)
        print(
            f"  {name:<32} {cocoon_s / ticks * 1000:>10.1f} {cocoon_s / window * 100:>6.2f}"
            f" {engine_s / ticks * 1000:>10.1f} {engine_s / window * 100:>6.2f}"
        )

    sandboxes: list[str] = []
    measured = []
    for level in levels:
        sandboxes += in_parallel(
            lambda _: call("sandbox.create", network="none")["id"], range(level - len(sandboxes))
        )
        time.sleep(3 * TICK_S)  # the last level's streams are closed, the new sandboxes settled
        with _steady_calls(server, "system.info", INFO_PER_S) as info:
            bare = measure()
            spawn_from = len(info)
            shells = in_parallel(
                lambda sandbox_id: call("agent.spawn", sandboxId=sandbox_id, profile="shell")["id"], sandboxes
            )
            settled = _settle(server.instance)
            spawn_to = len(info)
            agents = measure()
            hook, screen = _probes(server, call, sandboxes[0], runs)
        in_parallel(lambda agent_id: call("agent.kill", agentId=agent_id), shells)
        answered = [seconds for seconds in info if math.isfinite(seconds)]
        spawning = [seconds for seconds in info[spawn_from:spawn_to] if math.isfinite(seconds)]
        steady = [seconds for seconds in info[:spawn_from] + info[spawn_to:] if math.isfinite(seconds)]
        measured.append(
            Level(level, window, bare, agents, hook, screen, steady, spawning, len(info) - len(answered))
        )
        result = measured[-1]
        print(f"{level} sandboxes (the agents settled in {settled:.0f} s)")
        cost("no agents", bare)
        cost("one idle shell agent each", agents)
        cost("difference", result.above)
        cost("difference per sandbox", result.above, per=level)
        failed = f" ({result.failed} failed)" if result.failed else ""
        print(f"  hook -> event {_p50_p99(hook)}, screen -> event {_p50_p99(screen)}, "
              f"system.info {_p50_p99(steady)}, while the agents spawned {_p50_p99(spawning)}"
              f"{failed}")  # fmt: skip
    return measured


def _settle(instance: str) -> float:
    """Seconds until the engine ran no exec in the instance's sandboxes for SETTLED_S (at most
    SETTLE_MAX_S): the spawns, and the polls of sandboxes whose stream is not up yet, are over."""
    client, started = docker.from_env(), time.time()
    only = {"type": "container", "event": "exec_create", "label": f"io.cocoon.instance={instance}"}
    while (now := time.time()) - started < SETTLE_MAX_S:
        if now - started >= SETTLED_S and not list(
            client.events(since=now - SETTLED_S, until=now, decode=True, filters=only)
        ):
            break
        time.sleep(TICK_S)
    return time.time() - started


def _p50_p99(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values) * 1000:.0f}/{percentile(values, 0.99) * 1000:.0f}"


@contextmanager
def _steady_calls(server, method: str, per_s: float) -> Iterator[list[float]]:
    """Seconds each call of method took (inf: it failed), made per_s times a second over one kept-alive
    connection while the block runs, as a dashboard refreshing would."""
    latencies: list[float] = []
    stop = threading.Event()

    def run() -> None:
        headers = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            due = time.monotonic()
            while not stop.wait(max(0.0, due - time.monotonic())):
                due += 1 / per_s
                started = time.perf_counter()
                try:
                    answered = http.post(f"/v1/rpc/{method}", json={}).status_code == 200
                except httpx.HTTPError:
                    answered = False
                latencies.append(time.perf_counter() - started if answered else math.inf)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield latencies
    finally:
        stop.set()
        thread.join()


def _probes(server, call, sandbox_id: str, runs: int) -> tuple[list[float], list[float]]:
    """Hook -> event and screen -> event in the sandbox, each on a quiet agent of its own."""
    hooked, screened = _quiet_agent(call, sandbox_id), _quiet_agent(call, sandbox_id)
    try:
        time.sleep(TICK_S)  # their windows are linked into the sandbox's stream
        container = f"{server.instance}-{sandbox_id}"
        hook = _hook_latencies(server, container, hooked["id"], runs)
        return hook, _screen_latencies(server, call, container, screened["id"], runs)
    finally:
        for agent in (hooked, screened):
            call("agent.kill", agentId=agent["id"])


def _quiet_agent(call, sandbox_id: str) -> dict:
    """A claude-code agent whose `claude` is a stand-in that just stays in the foreground: only its
    hook reports and what others write to its terminal change its status."""
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
        # Each report must change the status (the first too, after an odd number of runs): else no event.
        statuses = ("done", "blocked")
        if ws.call("agent.get", {"agentId": agent_id})["status"] == statuses[0]:
            statuses = statuses[::-1]
        for index in range(runs):
            status = statuses[index % 2]
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


def _screen_latencies(server, call, container: str, agent_id: str, runs: int) -> list[float]:
    """Seconds from a line written straight to the agent's terminal, as its program's output would be
    (not through cocoon's input), to the agent.updated that shows it (its lastActivityAt moves; a quiet
    agent's idle becomes working too). It settles back to idle in between (3 s of quiet), so each
    sample starts from a quiet sandbox."""
    # One exec for all the lines: what is timed is the screen's way to the event, not an exec's start.
    script = (
        f'tty=$(tmux -L cocoon display-message -p -t "={agent_id}:" "#{{pane_tty}}") &&'
        ' while IFS= read -r line; do printf "%s\\n" "$line" > "$tty"; done'
    )
    command = ["docker", "exec", "-i", "-u", "agent", container, "sh", "-c", script]
    writer = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert writer.stdin is not None

    def write(line: str) -> None:
        writer.stdin.write(f"{line}\n".encode())
        writer.stdin.flush()

    latencies = []
    try:
        write("screen probe")  # the writer is up by the time the agent is idle (after its start-up grace)
        with server.ws() as ws:
            ws.call("events.subscribe", {"types": ["agent.updated"], "agentId": agent_id})
            for index in range(runs):
                call("agent.wait", agentId=agent_id, until=["idle"], timeoutS=60)  # fails if it does not
                time.sleep(random.uniform(0, TICK_S))
                before = call("agent.get", agentId=agent_id)["lastActivityAt"]
                started = time.time()
                write(f"screen probe {index}")
                while ws.next_event(timeout=60)["event"]["data"]["lastActivityAt"] <= before:
                    pass
                latencies.append(time.time() - started)
    finally:
        writer.stdin.close()
        try:
            writer.wait(10)
        except subprocess.TimeoutExpired:
            writer.kill()
    return latencies


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


class OneThreadClient:
    """A WebSocket client that reads its socket where the bytes are awaited, as the baseline reads its pty
    (and a browser its socket, on its one event loop): websockets' sync client hands every frame from a
    reader thread to the caller's, which added 0.3-0.4 ms to each echo on this machine."""

    def __init__(self, url: str) -> None:
        uri = parse_uri(url)
        self.protocol = ClientProtocol(uri)
        self.sock = socket.create_connection((uri.host, uri.port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.protocol.send_request(self.protocol.connect())
        self.frames: list = []
        while not any(isinstance(event, Response) for event in self.frames):
            self.frames += self._read(10)
        if self.protocol.handshake_exc is not None:
            raise self.protocol.handshake_exc
        self.frames = [event for event in self.frames if not isinstance(event, Response)]

    def __enter__(self) -> "OneThreadClient":
        return self

    def __exit__(self, *_exc) -> None:
        self.sock.close()

    def _read(self, timeout: float) -> list:
        self.sock.sendall(b"".join(self.protocol.data_to_send()))
        if not select.select([self.sock], [], [], timeout)[0]:
            raise TimeoutError("nothing from the server")
        if data := self.sock.recv(65536):
            self.protocol.receive_data(data)
        else:
            self.protocol.receive_eof()
        return self.protocol.events_received()

    def send(self, data: bytes) -> None:
        self.protocol.send_binary(data)
        self.sock.sendall(b"".join(self.protocol.data_to_send()))

    def recv(self, timeout: float = 5) -> bytes:
        while True:
            while self.frames:
                frame = self.frames.pop(0)
                if frame.opcode is Opcode.BINARY:
                    return frame.data
                if frame.opcode is Opcode.CLOSE:
                    raise ConnectionError("the server closed the terminal")
            self.frames = self._read(timeout)


def _bare_attach(container: str, agent_id: str, runs: int) -> list[float]:
    """Echo through bench/bare_attach.py on Daphne: what a WebSocket hop in Python costs by itself."""
    relay = daphne(
        "bench.bare_attach:application", COCOON_BENCH_CONTAINER=container, COCOON_BENCH_AGENT=agent_id
    )
    with relay as port, OneThreadClient(f"ws://127.0.0.1:{port}/") as ws:
        time.sleep(0.5)
        while _drain(lambda: ws.recv(timeout=0.2)):
            pass
        return _echo_times(runs, ws.send, ws.recv)


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
