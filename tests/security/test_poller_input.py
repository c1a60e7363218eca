"""Poller input is hostile input (issue #13, item 11): everything the poller reads from a sandbox (the
poll script's report, exit codes, hook reports, screens, screen hashes) is bounded and parsed per
agent, so one agent's files never cost another agent its status and a tick ends in bounded time."""

import base64
import time

import pytest

from agents import poller
from agents.status import ScreenRules, parse_exit_code, parse_hook, read_screen

CLAUDE_QUESTION = r"Do you want to (proceed|make this edit|create|allow|use this API key)\b.*\?"
RULES = ScreenRules.of(["claude"], True, r"(?i)esc to interrupt", [CLAUDE_QUESTION])
# Quadratic on the built-in Claude Code question: every "Do you want to proceed" scans to the line's
# end for a '?' that never comes (1.4 s at 184 KB with `re`).
NO_QUESTION = "Do you want to proceed " * 40_000


# -- the parsers, fast --------------------------------------------------------------------------------


def test_it_reads_a_5000_digit_exit_code_as_no_exit_code():
    assert parse_exit_code("9" * 5000) is None  # int() raises beyond 4,300 digits
    assert [parse_exit_code(text) for text in ("3\n", "0", "255", "256", "-1", "²", "", " 7 ")] == [
        3, 0, 255, None, None, None, None, 7,
    ]  # fmt: skip


def test_it_refuses_hook_reports_that_are_not_a_status_and_a_finite_time():
    assert parse_hook("done 1733212345.5") == ("done", 1733212345.5)
    for report in ("done inf", "done nan", "done -1", "done 1e999", "exited 5", "done " + "1" * 200):
        assert parse_hook(report) is None, report


def test_a_long_screen_line_is_read_in_bounded_time_and_a_pattern_out_of_time_does_not_match():
    started = time.monotonic()
    facts = read_screen(RULES, "\n".join([NO_QUESTION] * 3))
    assert facts.question == ""
    assert time.monotonic() - started < 2  # a guard, not a benchmark: `re` takes minutes here
    # A user's own pattern that backtracks exponentially within one bounded line: out of time, no match.
    slow = ScreenRules.of(["x"], False, "", [r"(a|aa)+$"])
    started = time.monotonic()
    facts = read_screen(slow, "a" * 1000 + "!")
    assert (facts.question, facts.timed_out) == ("", ("(a|aa)+$",))
    assert time.monotonic() - started < 2
    # The bottom of the screen still counts as before.
    assert read_screen(RULES, "x\n" * 40 + NO_QUESTION[:200] + "\nDo you want to proceed?\n").question


def test_a_pattern_that_no_longer_compiles_is_skipped_not_raised():
    assert ScreenRules.of(["x"], False, "(", ["[", "ok"]).blocked[0].pattern == "ok"


def test_one_agents_report_cannot_forge_or_break_another_agents_line():
    agents = {"ag_a": object(), "ag_b": object()}
    output = (
        "ag_a\t1\t" + "9" * 5000 + "\tdone 1\tbash\t\t\t\n"
        "ag_b\t0\t7\t\t\t\t\t\n"  # a forged line after A's: only the first line of an agent counts
        "ag_zz\t1\t\t\t\t\t\t\n"  # not polled
        "ag_b\t1\t\tdone\x1c 5\tbash\t" + "f" * 32 + "\t\t\n"  # \x1c must not split a line
    )
    fields = poller._poll_fields(output, agents)
    assert fields["ag_a"][1] == "9" * 5000
    assert fields["ag_b"][:2] == ["0", "7"]
    assert poller._poll_fields("ag_b\t1\textra\t\t\t\t\t\t\nag_b", agents) == {}
    assert poller._screen_text("not base64 \x00") == ""
    huge = base64.b64encode(NO_QUESTION.encode() * 10).decode()
    assert len(poller._screen_text(huge)) <= poller.SCREEN_TEXT_MAX
    # The sandbox's boot is digits on the first line, or nothing.
    assert poller._boot("boot\t12345\nag_a\t...") == "12345"
    for forged in ("boot\t12a\n", "boot\t" + "1" * 21, "ag_a\tboot\t1", "boot\t1\t2", ""):
        assert poller._boot(forged) == "", forged


# -- real sandboxes ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandboxes(cocoond, sandbox_image):
    created = [cocoond.call("sandbox.create", {"network": "none"}) for _ in range(2)]
    yield created
    for sandbox in created:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def spawn(cocoond, sandbox):
    return cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})["id"]


def sh(cocoond, sandbox, script):
    command = {"sandboxId": sandbox["id"], "command": ["sh", "-c", script]}
    result = cocoond.call("sandbox.exec", command)
    assert result["exitCode"] == 0, result


def wait(cocoond, agent_id, status, timeout):
    params = {"agentId": agent_id, "until": [status], "timeoutS": timeout}
    return cocoond.call("agent.wait", params)


@pytest.mark.e2e
def test_a_hostile_agent_never_spoils_its_neighbours_status(cocoond, sandboxes, docker_client):
    first, second = sandboxes
    hostile, fifo, neighbour, elsewhere = (spawn(cocoond, s) for s in (first, first, first, second))
    for agent in (neighbour, elsewhere):
        wait(cocoond, agent, "idle", 60)
    status = "/opt/cocoon/status"
    forged = f"{neighbour}\\t0\\t7\\t\\t\\t\\t\\n"
    # As the agent user: a 5,000-digit exit code and garbage with a forged line for the neighbour in
    # the hostile agent's files; a FIFO as another agent's hook report (a plain read blocks on it).
    sh(cocoond, first, f"printf '%s\\n{forged}' $(printf '9%.0s' $(seq 5000)) > {status}/{hostile}.exit")
    sh(
        cocoond,
        first,
        f"{{ printf '{{\"json\": [\\t\\n{forged}'; head -c 300 /dev/urandom; }} > {status}/{hostile}",
    )
    sh(cocoond, first, f"mkfifo {status}/{fifo}")
    # As root in the sandbox (what its tmux server says is the sandbox's to choose): the hostile agent's
    # screen is a 920 KB line of questions without a '?'.
    fake_tmux = (
        "#!/bin/sh\n"
        f'case "$*" in *"capture-pane -p -t ={hostile}:"*)\n'
        "  yes 'Do you want to proceed' | head -n 40000 | tr '\\n' ' '; echo; exit 0;;\n"
        "esac\n"
        'exec /usr/bin/tmux "$@"\n'
    )
    container = docker_client.containers.get(f"{cocoond.instance}-{first['id']}")
    install = 'printf "%s" "$FAKE" > /usr/local/bin/tmux && chmod 755 /usr/local/bin/tmux'
    written = container.exec_run(["sh", "-c", install], user="root", environment={"FAKE": fake_tmux})
    assert written.exit_code == 0, written
    try:
        # The neighbours keep getting their status in normal ticks (2 s): a guard of 10 s each way.
        for agent in (neighbour, elsewhere):
            cocoond.call("agent.send_input", {"agentId": agent, "text": "sleep 12"})
            assert wait(cocoond, agent, "working", 10)["status"] == "working"
            assert wait(cocoond, agent, "idle", 20)["status"] == "idle"
        for agent in (hostile, fifo):
            seen = cocoond.call("agent.get", {"agentId": agent})
            assert (seen["status"], seen["exitCode"]) == ("idle", None), seen
            assert cocoond.call("agent.explain", {"agentId": agent})["rule"] == "shell_prompt"
        cocoond.call("agent.send_input", {"agentId": neighbour, "text": "exit 3"})
        exited = wait(cocoond, neighbour, "exited", 20)
        assert exited["exitCode"] == 3
    finally:
        container.exec_run(["rm", "-f", "/usr/local/bin/tmux"], user="root")
