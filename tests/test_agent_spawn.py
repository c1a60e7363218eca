"""agent.spawn in one round trip (issue #16): one exec writes the env file and the CLI's files and
starts the session; a start that fails leaves nothing behind; what the sandbox answers is parsed
strictly."""

import pytest

from agents import services, tmux
from agents.models import Agent, AgentProfile
from cocoon.actors import SYSTEM_ACTOR
from sandboxes import pools
from sandboxes import services as sandboxes
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError, ExecResult
from sandboxes.drivers.docker import DockerDriver
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sandbox(sandbox_image):
    created = pools.create_sandbox(
        actor=SYSTEM_ACTOR, pool=False, network="none", image=sandbox_image
    ).sandbox
    yield created
    sandboxes.delete_sandbox(created.id, actor=SYSTEM_ACTOR)


@pytest.fixture
def execs(monkeypatch):
    """The commands the driver runs in sandboxes from now on."""
    commands = []
    engine_exec = DockerDriver.exec

    def counted(driver, sandbox_id, command, **options):
        commands.append(command)
        return engine_exec(driver, sandbox_id, command, **options)

    monkeypatch.setattr(DockerDriver, "exec", counted)
    return commands


def shell(sandbox, script: str) -> str:
    return get_driver().exec(sandbox.id, ["sh", "-c", script]).checked().stdout.decode()


def test_a_spawn_is_one_exec_and_two_when_the_home_has_the_clis_files(sandbox, execs):
    services.spawn_agent(sandbox.id, "shell", actor=SYSTEM_ACTOR)
    assert len(execs) == 1
    # No toolbox here: the CLIs are not found and exit, after their files are written.
    for profile in ("codex", "claude-code"):
        execs.clear()
        services.spawn_agent(sandbox.id, profile, actor=SYSTEM_ACTOR)
        assert len(execs) == 1, profile  # a home without any of its files
    written = shell(sandbox, "cat ~/.codex/config.toml")
    execs.clear()
    services.spawn_agent(sandbox.id, "codex", actor=SYSTEM_ACTOR)
    assert len(execs) == 2  # it finds the file, then merges into what it found
    assert shell(sandbox, "cat ~/.codex/config.toml") == written
    assert shell(sandbox, "stat -c '%a %U' ~/.codex ~/.codex/config.toml ~/.claude.json") == (
        "700 agent\n600 agent\n600 agent\n"
    )
    assert shell(sandbox, "ls -A ~/.cocoon/env; ls -A ~/.codex") == "config.toml\n"


def test_the_session_starts_in_the_workspace_with_the_sandboxs_umask(sandbox):
    probe = ["sh", "-c", "echo $(pwd) $(umask) > /tmp/probe; exec sleep 60"]
    AgentProfile.objects.create(name="probe", command=probe)
    services.spawn_agent(sandbox.id, "probe", actor=SYSTEM_ACTOR)
    wait_until(lambda: shell(sandbox, "cat /tmp/probe 2>/dev/null"), timeout=10)
    # The env file is private (umask 077), the agent's own files are not.
    assert shell(sandbox, "cat /tmp/probe") == f"/workspace {shell(sandbox, 'umask').strip()}\n"


def test_a_start_that_fails_leaves_no_env_file_no_session_and_no_row(sandbox):
    shell(sandbox, "mkdir -p ~/.codex/config.toml")  # a directory where the file goes: it cannot
    with pytest.raises(DriverError):
        services.spawn_agent(sandbox.id, "codex", actor=SYSTEM_ACTOR, env={"SECRET": "x"})
    assert shell(
        sandbox, f"ls -A ~/.cocoon/env ~/.codex/config.toml; {tmux.TMUX_LINE} ls 2>&1 | grep ag_; true"
    ) == ("/home/agent/.cocoon/env:\n\n/home/agent/.codex/config.toml:\n")
    assert not Agent.objects.exists()


def test_a_start_whose_stdin_was_cut_short_starts_nothing(sandbox):
    # What the engine does with a start whose cocoond died while sending: its stdin just ends.
    script = ["sh", "-c", tmux.START, "start", "ag_cut", "80", "24", "100", "0", "", tmux.WRAPPER, "sh"]
    assert get_driver().exec(sandbox.id, script, stdin=b"export A=1\n").exit_code == 1
    assert shell(sandbox, f"ls -A ~/.cocoon/env; {tmux.TMUX_LINE} ls 2>&1 | grep ag_; true") == ""


# A dd that, after reading an agent's exit file, makes the agent exit 3 and waits until its pane is
# dead: the program ends between the poll's reads.
EXIT_BETWEEN_READS = f"""#!/bin/sh
/bin/dd "$@"
case "$*" in *ag_race.exit*)
  {tmux.TMUX_LINE} send-keys -t =ag_race: 'exit 3' Enter
  until [ "$({tmux.TMUX_LINE} display-message -p -t =ag_race: '#{{pane_dead}}')" = 1 ]; do sleep 0.05; done
esac
"""


def test_an_agent_that_ends_while_it_is_polled_is_reported_with_its_exit_code(sandbox):
    # The wrapper writes the code before its pane dies, so a poll that reads the code after it found
    # the pane dead always has it (read before, it was lost: exit code None, seen under gVisor).
    tmux.start_session(sandbox.id, "ag_race", ["bash"], {}, 80, 24)
    shim = ["sh", "-c", "mkdir -p ~/shim && cat > ~/shim/dd && chmod +x ~/shim/dd"]
    get_driver().exec(sandbox.id, shim, stdin=EXIT_BETWEEN_READS.encode()).checked()
    poll = ["sh", "-c", tmux.POLL, "poll", "ag_race="]
    shimmed = ["sh", "-c", 'PATH="$HOME/shim:$PATH" exec "$@"', "shimmed", *poll]
    reports = [
        get_driver().exec(sandbox.id, command).checked().stdout.decode() for command in (shimmed, poll)
    ]
    fields = [[field.strip() for field in report.split("\n")[1].split("\t")[1:3]] for report in reports]
    assert ["0", ""] not in fields, fields  # alive, exit code
    assert fields[-1] == ["0", "3"]


@pytest.fixture
def answers(monkeypatch):
    """The answers a sandbox gives to the next execs (set by the test), and the commands it was sent."""
    given: list[ExecResult] = []
    commands: list[list[str]] = []

    def exec_(driver, sandbox_id, command, **options):
        commands.append(command)
        return given.pop(0) if given else ExecResult(0, b"", b"")

    monkeypatch.setattr(DockerDriver, "exec", exec_)
    return given, commands


@pytest.mark.parametrize(
    ("stdout", "boot"), [(b"12345\n", "12345"), (b"1" * 21, ""), (b"123 456", ""), (b"\xff", "")]
)
def test_a_boot_that_is_not_one_is_no_boot(answers, stdout, boot):
    answers[0].append(ExecResult(0, stdout, b""))
    assert tmux.start_session("sb_x", "ag_x", ["sh"], {}, 80, 24) == boot


def test_the_files_a_home_has_are_read_as_they_are_and_nothing_is_undone(answers):
    given, commands = answers
    given.append(ExecResult(tmux.FILES_FOUND, b"-\neyJhIjogMX0=\n\n", b""))
    with pytest.raises(tmux.HomeFilesFound) as home:
        tmux.start_session(
            "sb_x", "ag_x", ["sh"], {}, 80, 24, dict.fromkeys([".a", ".b", ".c"], "{}"), create_only=True
        )
    # An empty line: an empty file, or one the agent user cannot read (merged as empty, as before).
    assert home.value.found == {".a": None, ".b": b'{"a": 1}', ".c": b""}
    assert len(commands) == 1  # the script started nothing


@pytest.mark.parametrize(
    ("stdout", "truncated"),
    [(b"-\nnot base64!\n", False), (b"-\n-\n-\n", False), (b"-\n-", False), (b"-\n-\n", True)],
)
def test_a_malformed_list_of_files_is_refused_and_the_start_undone(answers, stdout, truncated):
    given, commands = answers
    given.append(ExecResult(tmux.FILES_FOUND, stdout, b"", truncated=truncated))
    with pytest.raises(DriverError):
        tmux.start_session("sb_x", "ag_x", ["sh"], {}, 80, 24, {".a": "{}", ".b": "{}"}, create_only=True)
    assert commands[1] == tmux.close_session("ag_x")


def test_files_found_when_none_were_to_be_created_are_a_failed_start(answers):
    given, commands = answers
    given.append(ExecResult(tmux.FILES_FOUND, b"-\n", b""))
    with pytest.raises(DriverError):
        tmux.start_session("sb_x", "ag_x", ["sh"], {}, 80, 24, {".a": "{}"})
    assert commands[1] == tmux.close_session("ag_x")
