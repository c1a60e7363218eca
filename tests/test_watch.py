"""The watcher (agents.watch): status pushed by each sandbox's tmux control-mode stream, not polled.

cocoond runs here with a 60 s poll tick, so every status change that arrives within seconds was pushed.
"""

import base64
import re
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents import tmux, watch
from agents.reader import Reader
from agents.stream import Question, SandboxWatch
from tests.conftest import Cocoond, wait_until

TICK_S = "60"
# A status change within this is pushed, not ticked (how fast it comes is bench/agents.py's to measure;
# a loaded CI machine takes seconds for an exec into gVisor).
PUSHED_S = 10


def start_watched(folder: Any, **env: str) -> Cocoond:
    instance = Cocoond(data=folder / "data", env={"COCOON_POLL_INTERVAL_S": TICK_S, **env}).start()
    # A shell whose status hooks count, as Claude Code's and Codex's do: cocoon-status is its hook.
    instance.call("profile.create", {"name": "hooked", "command": ["bash", "-l"], "hooks": True})
    return instance


@pytest.fixture(scope="module")
def watched(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any, sandbox_image: str
) -> Iterator[Cocoond]:
    instance = start_watched(tmp_path_factory.mktemp("watched"))
    yield instance
    instance.stop()


def call(cocoond: Cocoond, method: str, **params: Any) -> Any:
    return cocoond.call(method, params)


def sandbox_exec(cocoond: Cocoond, sandbox: dict, script: str) -> dict:
    return call(cocoond, "sandbox.exec", sandboxId=sandbox["id"], command=["sh", "-c", script])


def new_sandbox(cocoond: Cocoond) -> dict:
    return call(cocoond, "sandbox.create", network="none")


def spawn_idle(cocoond: Cocoond, sandbox: dict) -> dict:
    agent = call(cocoond, "agent.spawn", sandboxId=sandbox["id"], profile="hooked")
    # The first status comes from the first tick after the spawn (at most TICK_S) or from a sign.
    assert call(cocoond, "agent.wait", agentId=agent["id"], until=["idle"], timeoutS=90)["status"] == "idle"
    return agent


def until(cocoond: Cocoond, agent: dict, status: str, timeout: float = PUSHED_S) -> dict:
    return call(cocoond, "agent.wait", agentId=agent["id"], until=[status], timeoutS=timeout)


def hook_latencies(cocoond: Cocoond, sandbox: dict, agent: dict, statuses: list[str]) -> list[float]:
    """Seconds from each hook report (cocoon-status, as the agents' native hooks call it) in the sandbox
    to the agent's status."""
    latencies = []
    for status in statuses:
        started = time.monotonic()
        sandbox_exec(cocoond, sandbox, f"cocoon-status {status} {agent['id']}")
        assert until(cocoond, agent, status)["status"] == status
        latencies.append(time.monotonic() - started)
    return latencies


def test_a_stream_that_connects_asks_for_a_poll() -> None:
    # Whatever happened while the sandbox had no stream (its container restarted, another process held
    # it) is read at once: the stream before may have ended without a sign (closed by the watcher).
    signs: list[tuple[str, bool]] = []
    stream = SandboxWatch("sb_x", lambda *sign: signs.append(sign), print, print, Reader())
    stream.feed(b"%begin 1 2 0\n%end 1 2 0\n%session-changed $1 cocoon-watch\n")
    assert stream.connected.is_set()
    assert signs == [("sb_x", True)]


def test_output_is_polled_at_once_while_a_recheck_is_seconds_away() -> None:
    # A recheck (time may change a status) pending 30 s ahead once held up the poll output asked for.
    polled: list[float] = []
    watcher = watch.Watcher(lambda sandbox_id: polled.append(time.monotonic()), lambda *report: True)
    watcher.sign("sb_x", after=30)
    printed = time.monotonic()
    watcher.sign("sb_x", urgent=False)
    wait_until(lambda: polled, timeout=10)
    assert polled[0] - printed < 5


def test_hook_reports_output_and_exits_arrive_without_a_tick(watched: Cocoond) -> None:
    sandbox = new_sandbox(watched)
    try:
        agent = spawn_idle(watched, sandbox)
        # Hook reports, pushed: well under the tick.
        latencies = hook_latencies(watched, sandbox, agent, ["blocked", "done"] * 3)
        assert statistics.median(latencies) < 1.5, latencies
        assert call(watched, "agent.get", agentId=agent["id"])["statusSource"] == "hook"

        # Typing makes it work and its output makes it idle again: screen changes, pushed.
        call(watched, "agent.send_input", agentId=agent["id"], text="sleep 2; echo slept-$((6*7))")
        assert until(watched, agent, "working")["status"] == "working"
        assert until(watched, agent, "idle", timeout=10)["status"] == "idle"
        assert "slept-42" in call(watched, "agent.read", agentId=agent["id"])["screen"]

        # Its program ends: the exit code, pushed.
        call(watched, "agent.send_input", agentId=agent["id"], text="exit 7")
        exited = until(watched, agent, "exited")
        assert (exited["status"], exited["exitCode"]) == ("exited", 7)
    finally:
        call(watched, "sandbox.delete", sandboxId=sandbox["id"])


def test_a_watched_sandbox_is_polled_on_its_stream_not_by_an_exec(
    watched: Cocoond, docker_client: Any
) -> None:
    # An exec costs the engine ~64 ms of CPU: a watched sandbox's polls run in its own tmux server.
    sandbox = new_sandbox(watched)
    try:
        agent = spawn_idle(watched, sandbox)
        since = time.time()
        call(watched, "agent.send_input", agentId=agent["id"], text="sleep 1; echo slept-$((6*7)); exit 5")
        exited = until(watched, agent, "exited")
        assert (exited["status"], exited["exitCode"]) == ("exited", 5)
        assert "slept-42" in call(watched, "agent.read", agentId=agent["id"])["screen"]
        execs = list(
            docker_client.events(
                since=since,
                until=time.time() + 1,
                decode=True,
                filters={"event": "exec_create", "container": f"{watched.instance}-{sandbox['id']}"},
            )
        )
        assert any("send-keys" in event["Action"] for event in execs), execs  # the input: an exec
        assert [event for event in execs if "pane_current_command" in event["Action"]] == []
    finally:
        call(watched, "sandbox.delete", sandboxId=sandbox["id"])


def test_time_passing_settles_a_status_without_a_sign(watched: Cocoond) -> None:
    """The rules that count quiet time (start-up grace, a screen settling) get no sign from the sandbox
    when the time is up: the watcher looks again then. Read with agent.get, which never polls."""
    if not any(p["name"] == "catter" for p in call(watched, "profile.list")):
        call(watched, "profile.create", name="catter", command=["cat"])  # not a shell: the screen decides
    sandbox = new_sandbox(watched)
    try:
        agent = call(watched, "agent.spawn", sandboxId=sandbox["id"], profile="catter")

        def status() -> str:
            return call(watched, "agent.get", agentId=agent["id"])["status"]

        # Out of its start-up grace (10 s) into idle, with nothing printed.
        wait_until(lambda: status() == "idle", timeout=15)
        call(watched, "agent.send_input", agentId=agent["id"], text="a task")
        wait_until(lambda: status() == "working", timeout=5)
        # The screen stands still: done once it has settled (3 s), not at the safety poll a minute on.
        started = time.monotonic()
        wait_until(lambda: status() == "done", timeout=8)
        assert time.monotonic() - started < 6
    finally:
        call(watched, "sandbox.delete", sandboxId=sandbox["id"])


def test_a_screen_that_moves_is_an_event_even_when_the_status_stays(watched: Cocoond) -> None:
    sandbox = new_sandbox(watched)
    try:
        agent = spawn_idle(watched, sandbox)
        before = call(watched, "agent.get", agentId=agent["id"])["lastActivityAt"]
        with watched.ws() as ws:
            ws.call("events.subscribe", {"types": ["agent.updated"]})
            # `echo` is the shell's own: its prompt stays in front, the agent stays idle.
            call(watched, "agent.send_input", agentId=agent["id"], text="echo moved")
            event = ws.next_event(timeout=5)["event"]["data"]
        assert (event["id"], event["status"]) == (agent["id"], "idle")
        assert event["lastActivityAt"] > before
    finally:
        call(watched, "sandbox.delete", sandboxId=sandbox["id"])


def test_a_flooding_sandbox_costs_a_few_polls_and_never_delays_another(
    watched: Cocoond, docker_client: Any
) -> None:
    noisy, quiet = new_sandbox(watched), new_sandbox(watched)
    try:
        loud, calm = spawn_idle(watched, noisy), spawn_idle(watched, quiet)
        # One agent prints without pause, another renames its tmux window as fast as it can.
        call(watched, "agent.send_input", agentId=loud["id"], text="yes flood")
        second = call(watched, "agent.spawn", sandboxId=noisy["id"], profile="shell")
        call(
            watched,
            "agent.send_input",
            agentId=second["id"],
            text="while :; do tmux -L cocoon rename-window x$RANDOM; done",
        )
        time.sleep(2)
        container = docker_client.containers.get(f"{watched.instance}-{noisy['id']}")
        since = time.time()
        latencies = hook_latencies(watched, quiet, calm, ["blocked", "done"] * 2)
        time.sleep(max(0.0, 5 - (time.time() - since)))
        ended = time.time()
        assert statistics.median(latencies) < 1.5, latencies
        # The noisy sandbox is polled at most once per MIN_GAP_S (0.25 s), however much it prints.
        execs = docker_client.events(
            since=since, until=ended, filters={"container": container.id, "event": "exec_create"}, decode=True
        )
        assert len(list(execs)) <= (ended - since) / 0.25 + 2
        assert until(watched, loud, "working")["status"] == "working"
    finally:
        call(watched, "sandbox.delete", sandboxId=noisy["id"])
        call(watched, "sandbox.delete", sandboxId=quiet["id"])


def test_a_sandbox_that_kills_its_watch_stream_is_watched_again(watched: Cocoond) -> None:
    sandbox = new_sandbox(watched)
    try:
        agent = spawn_idle(watched, sandbox)
        killed = sandbox_exec(watched, sandbox, "tmux -L cocoon kill-session -t =cocoon-watch")
        assert killed["exitCode"] == 0
        # A new stream (at once, or within RETRY_S): long before the next tick, reports are pushed again.
        time.sleep(6)
        latencies = hook_latencies(watched, sandbox, agent, ["blocked", "done", "blocked"])
        assert max(latencies) < PUSHED_S, latencies
        # The agent's session is still there and still its own.
        assert agent["id"] in sandbox_exec(watched, sandbox, "tmux -L cocoon ls")["stdout"]
    finally:
        call(watched, "sandbox.delete", sandboxId=sandbox["id"])


def test_many_agents_in_one_sandbox_each_get_their_own_status(watched: Cocoond) -> None:
    sandbox = new_sandbox(watched)
    try:
        agents = [call(watched, "agent.spawn", sandboxId=sandbox["id"], profile="hooked") for _ in range(4)]
        for agent in agents:
            assert until(watched, agent, "idle", timeout=90)["status"] == "idle"
        errors: list[str] = []

        def report(agent: dict, status: str) -> None:
            sandbox_exec(watched, sandbox, f"cocoon-status {status} {agent['id']}")
            if until(watched, agent, status)["status"] != status:
                errors.append(agent["id"])

        threads = [
            threading.Thread(target=report, args=(agent, ["blocked", "done"][i % 2]))
            for i, agent in enumerate(agents)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        statuses = [call(watched, "agent.get", agentId=agent["id"])["status"] for agent in agents]
        assert statuses == ["blocked", "done", "blocked", "done"]
    finally:
        call(watched, "sandbox.delete", sandboxId=sandbox["id"])


def test_an_overlong_line_leaves_the_stream_working(watched: Cocoond) -> None:
    sandbox = new_sandbox(watched)
    try:
        printer, reporter = spawn_idle(watched, sandbox), spawn_idle(watched, sandbox)
        # 4 MB without a newline: tmux forwards it as long %output lines, which the watcher skips.
        flood = "head -c 4000000 /dev/zero | tr '\\0' a"
        call(watched, "agent.send_input", agentId=printer["id"], text=flood)
        time.sleep(2)
        assert max(hook_latencies(watched, sandbox, reporter, ["blocked", "done"])) < PUSHED_S
    finally:
        call(watched, "sandbox.delete", sandboxId=sandbox["id"])


def threads(pid: int) -> int:
    return int(re.search(r"^Threads:\s+(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M)[1])


def test_one_thread_reads_every_stream(watched: Cocoond) -> None:
    assert watched.proc is not None
    sandboxes = [new_sandbox(watched)]
    try:
        spawn_idle(watched, sandboxes[0])
        before = threads(watched.proc.pid)
        for _ in range(10):
            sandboxes.append(new_sandbox(watched))
            spawn_idle(watched, sandboxes[-1])
        # Ten more streams, each pushing: a thread each would be ten more (the pools may grow a little).
        assert threads(watched.proc.pid) - before < 6
        for sandbox in (sandboxes[1], sandboxes[-1]):
            agent = call(watched, "agent.list", sandboxId=sandbox["id"])[0]
            assert max(hook_latencies(watched, sandbox, agent, ["blocked", "done"])) < PUSHED_S
    finally:
        for sandbox in sandboxes:
            call(watched, "sandbox.delete", sandboxId=sandbox["id"])


def test_a_bwrap_sandbox_is_watched_from_inside_its_namespaces(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cocoond = start_watched(tmp_path_factory.mktemp("watched-bwrap"), COCOON_DRIVER="bwrap")
    try:
        sandbox = new_sandbox(cocoond)
        agent = spawn_idle(cocoond, sandbox)
        latencies = hook_latencies(cocoond, sandbox, agent, ["blocked", "done", "blocked"])
        assert max(latencies) < PUSHED_S, latencies
        # The stream's tmux client runs inside the sandbox's namespaces (its ps shows it), not on the host.
        assert "-C attach -t =cocoon-watch" in sandbox_exec(cocoond, sandbox, "ps -eo args")["stdout"]
        call(cocoond, "sandbox.delete", sandboxId=sandbox["id"])
    finally:
        cocoond.stop()


def test_a_gvisor_sandbox_is_watched(watched: Cocoond) -> None:
    sandbox = call(watched, "sandbox.create", network="none", runtime="runsc")
    try:
        agent = spawn_idle(watched, sandbox)
        latencies = hook_latencies(watched, sandbox, agent, ["blocked", "done", "blocked"])
        assert max(latencies) < PUSHED_S, latencies
    finally:
        call(watched, "sandbox.delete", sandboxId=sandbox["id"])


def test_reports_on_the_stream_reach_only_agents_of_their_own_sandbox(watched: Cocoond) -> None:
    mine, other = new_sandbox(watched), new_sandbox(watched)
    try:
        agent, victim = spawn_idle(watched, mine), spawn_idle(watched, other)
        fifo = "/opt/cocoon/status/.events"
        # Forged and malformed lines on this sandbox's events FIFO: a report for another sandbox's agent,
        # an unknown status, an overlong id, a line of 60 KB.
        forged = [
            f"{victim['id']} blocked 9999999999.5",
            f"{agent['id']} rooted 9999999999.5",
            f"ag_{'a' * 200} blocked 1",
            "x" * 60_000,
        ]
        script = " ; ".join(f"echo '{line}' > {fifo}" for line in forged)
        sandbox_exec(watched, mine, script)
        time.sleep(2)
        assert call(watched, "agent.get", agentId=victim["id"])["status"] == "idle"
        assert call(watched, "agent.get", agentId=agent["id"])["status"] == "idle"
        # The stream still works for its own agent.
        assert max(hook_latencies(watched, mine, agent, ["blocked", "done"])) < PUSHED_S
    finally:
        call(watched, "sandbox.delete", sandboxId=mine["id"])
        call(watched, "sandbox.delete", sandboxId=other["id"])


def answer(*lines: bytes, nonce: str = "") -> tuple[Question, list[bytes]]:
    """A question fed these lines (as its stream's Reader would), and the lines it left to the stream."""
    question = Question()
    left = [line for line in lines if not question.take(line.replace(b"NONCE", question.nonce.encode()))]
    return question, left


def test_a_polls_answer_is_read_between_its_markers_only() -> None:
    report = base64.encodebytes(b"boot\t12\nag_x\t1\t\t\tbash\t" + b"f" * 32 + b"\t\t\n").splitlines()
    question, left = answer(
        b"%output %1 cocoon-poll NONCE",  # an agent printing the marker is escaped output, not a marker
        b"cocoon-poll 0123",  # another question's
        b"cocoon-poll NONCE",
        *report,
        b"cocoon-poll-end NONCE",
        b"%window-renamed @1 bash",
    )
    assert question.done.is_set()
    assert question.answer == "boot\t12\nag_x\t1\t\t\tbash\t" + "f" * 32 + "\t\t\n"
    assert left == [b"%output %1 cocoon-poll NONCE", b"cocoon-poll 0123", b"%window-renamed @1 bash"]


@pytest.mark.parametrize(
    "body",
    [
        [b"Ym9vdAkxMgo=", b"%exit"],  # not base64: a notification cannot come inside an answer
        [b"Ym9vdAkxMgo"],  # base64 cut short
        [b"QUFB" * 19] * 20,  # over ANSWER_MAX (set to 1 KB below)
    ],
)
def test_an_answer_that_is_not_a_bounded_base64_report_is_a_failed_poll(
    body: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agents.stream.ANSWER_MAX", 1024)
    question, left = answer(b"cocoon-poll NONCE", *body, b"cocoon-poll-end NONCE", b"%exit")
    assert (question.done.is_set(), question.answer, left) == (True, None, [b"%exit"])


def test_a_stream_that_ends_wakes_its_question() -> None:
    stream = SandboxWatch("sb_x", print, print, lambda sandbox_id: None, Reader())
    question = stream._question = Question()
    stream.feed(b"cocoon-poll " + question.nonce.encode() + b"\nYm9v\n")
    stream.end()
    assert (question.done.is_set(), question.answer) == (True, None)


def test_a_sandbox_whose_tmux_does_not_answer_its_poll_gets_its_status_by_an_exec(watched: Cocoond) -> None:
    # The agent has its tmux server run every job with a base64 that never ends: the poll on the stream
    # times out, the stream is closed, the next poll is an exec (and the stream is opened again). Its
    # later polls are execs too: one hung poll, not one on every new stream.
    sandbox, other = new_sandbox(watched), new_sandbox(watched)
    try:
        agent, bystander = spawn_idle(watched, sandbox), spawn_idle(watched, other)
        # Its base64 counts the polls it hangs (each decodes the poll script once).
        evil = 'case "$1" in -d) echo >> ~/evil/hung; exec sleep 600;; esac; exec /usr/bin/base64 "$@"'
        hang = (
            f"mkdir -p ~/evil && printf '#!/bin/sh\\n%s\\n' '{evil}' > ~/evil/base64"
            " && chmod +x ~/evil/base64"
            f' && {tmux.TMUX_LINE} set-environment -g PATH "$HOME/evil:$PATH"'
        )
        sandbox_exec(watched, sandbox, hang)
        # The first poll hangs for its 10 s (the command outlasts it and the pause before the next poll);
        # the next ones are execs, which see each command run.
        for command in ("sleep 25", "sleep 3", "sleep 3"):
            call(watched, "agent.send_input", agentId=agent["id"], text=command)
            until(watched, agent, "working", timeout=30)
            until(watched, agent, "idle", timeout=30)
        assert sandbox_exec(watched, sandbox, "wc -l < ~/evil/hung")["stdout"] == "1\n"
        call(watched, "agent.send_input", agentId=agent["id"], text="exit 4")
        exited = until(watched, agent, "exited", timeout=60)
        assert (exited["status"], exited["exitCode"]) == ("exited", 4)
        # Meanwhile another sandbox's agent is served as ever.
        assert max(hook_latencies(watched, other, bystander, ["blocked", "done"])) < PUSHED_S
    finally:
        for each in (sandbox, other):
            call(watched, "sandbox.delete", sandboxId=each["id"])
