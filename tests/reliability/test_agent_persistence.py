"""Nothing an agent showed is lost when it ends (issue #14, 6): agent.read of an agent that is gone
answers with the last screen cocoon kept, every agent says why it ended, and agents whose sandbox
restarted under them (an engine or host restart) are resumed when their profile can resume."""

import secrets

import pytest

from agents import poller, services
from agents.models import Agent
from cocoon.actors import SYSTEM_ACTOR
from sandboxes import pools
from sandboxes import services as sandboxes
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def sandbox(cocoond, sandbox_image):
    created = cocoond.call("sandbox.create", {"network": "none"})
    yield created
    cocoond.post("sandbox.delete", {"sandboxId": created["id"]})


def spawn(cocoond, sandbox, prompt: str, profile: str = "shell") -> dict:
    return cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": profile, "prompt": prompt})


def agent_row(cocoond, agent: dict) -> dict:
    return next(row for row in cocoond.call("agent.list") if row["id"] == agent["id"])


def ended(cocoond, agent: dict, timeout: float = 30) -> dict:
    return wait_until(lambda: (row := agent_row(cocoond, agent))["status"] == "exited" and row, timeout)


def shows(cocoond, agent: dict, text: str) -> bool:
    return text in cocoond.call("agent.read", {"agentId": agent["id"]})["screen"]


def test_an_agent_that_exits_keeps_its_final_screen_scrollback_and_exit_code(cocoond, sandbox):
    marker = f"final-{secrets.token_hex(4)}"
    # 300 numbered lines scroll off a 40-line screen; the program ends at once, between two polls.
    agent = spawn(cocoond, sandbox, f"seq -f 'line %g' 300; echo {marker}; exit 3")
    row = ended(cocoond, agent)
    assert (row["exitCode"], row["exitReason"]) == (3, "exited")
    read = cocoond.call("agent.read", {"agentId": agent["id"], "scrollback": 1000})
    assert read["lastKnown"] is True
    assert read["capturedAt"]
    assert marker in read["screen"]
    kept = read["scrollback"].split("\n")
    assert "line 250" in kept
    assert "line 1" not in kept  # bounded: 200 lines above the screen
    assert len(kept) <= 200
    last_two = cocoond.call("agent.read", {"agentId": agent["id"], "scrollback": 2})["scrollback"]
    assert len(last_two.split("\n")) == 2


def test_a_killed_agent_keeps_the_screen_it_had(cocoond, sandbox):
    marker = f"killed-{secrets.token_hex(4)}"
    agent = spawn(cocoond, sandbox, f"echo {marker}")
    wait_until(lambda: shows(cocoond, agent, f"\n{marker}"))
    killed = cocoond.call("agent.kill", {"agentId": agent["id"]})
    assert (killed["status"], killed["exitReason"], killed["exitCode"]) == ("exited", "killed", None)
    read = cocoond.call("agent.read", {"agentId": agent["id"]})
    assert read["lastKnown"] is True
    assert f"\n{marker}" in read["screen"]


@pytest.mark.django_db(transaction=True)
def test_a_kill_while_a_poll_is_under_way_stands(sandbox_image, monkeypatch):
    # A poll reads the live agents' rows, then asks the sandbox. A kill in between ended the agent, and
    # the poll, finding the session gone, wrote its older copy of the row whole: the killed agent read
    # back as session_vanished with the screen the poll had (an empty one; CI, once).
    sandbox = pools.create_sandbox(
        actor=SYSTEM_ACTOR, pool=False, network="none", image=sandbox_image
    ).sandbox
    try:
        agent = services.spawn_agent(sandbox.id, "shell", actor=SYSTEM_ACTOR, prompt="echo kept-marker")
        wait_until(lambda: "\nkept-marker" in services.read_screen(agent.id).screen)
        look = poller._poll_output

        def killed_meanwhile(item):
            services.kill_agent(agent.id, actor=SYSTEM_ACTOR)
            return look(item)

        monkeypatch.setattr(poller, "_poll_output", killed_meanwhile)
        assert poller.poll_all(only=sandbox.id) == 0
        row = Agent.objects.get(pk=agent.pk)
        assert (row.status, row.exit_reason, row.rule) == ("exited", "killed", "killed")
        assert "\nkept-marker" in row.last_screen
    finally:
        sandboxes.delete_sandbox(sandbox.id, actor=SYSTEM_ACTOR)


def test_an_agent_whose_session_is_closed_from_inside_ends_while_the_others_run_on(cocoond, sandbox):
    # The tmux server runs on for the other agent, and there display-message answers a missing session
    # with success and an empty format: the poll once took that for a live agent, forever.
    gone, staying = spawn(cocoond, sandbox, "echo one"), spawn(cocoond, sandbox, "echo two")
    for agent in (gone, staying):
        cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 30})
    command = ["tmux", "-L", "cocoon", "kill-session", "-t", f"={gone['id']}"]
    assert cocoond.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": command})["exitCode"] == 0
    row = ended(cocoond, gone)
    assert (row["exitReason"], row["exitCode"]) == ("session_vanished", None)
    assert agent_row(cocoond, staying)["status"] == "idle"


def test_agents_end_with_their_sandbox_and_stay_readable_while_it_is_stopped(cocoond, sandbox):
    marker = f"stopped-{secrets.token_hex(4)}"
    agent = spawn(cocoond, sandbox, f"echo {marker}")
    wait_until(lambda: shows(cocoond, agent, f"\n{marker}"))
    cocoond.call("sandbox.stop", {"sandboxId": sandbox["id"]})
    row = agent_row(cocoond, agent)
    assert (row["status"], row["exitReason"]) == ("exited", "sandbox_stopped")
    read = cocoond.call("agent.read", {"agentId": agent["id"]})
    assert read["lastKnown"] is True
    assert f"\n{marker}" in read["screen"]
    explained = cocoond.call("agent.explain", {"agentId": agent["id"]})
    assert explained["rule"] == "sandbox_stopped"
    # Started again through cocoon, the sandbox does not bring them back: they were stopped on purpose.
    cocoond.call("sandbox.start", {"sandboxId": sandbox["id"]})
    assert agent_row(cocoond, agent)["status"] == "exited"


def restart_under_cocoon(docker_client, sandbox: dict) -> None:
    """What an engine or host restart does to a sandbox: its container starts again, its processes
    (tmux, the agents) do not come back. (tests/chaos restarts dockerd itself.)"""
    (container,) = docker_client.containers.list(filters={"label": f"io.cocoon.sandbox={sandbox['id']}"})
    container.restart(timeout=1)


@pytest.fixture
def resumable(cocoond):
    """A profile that can resume: its resume command says so on the screen."""
    name = f"resumable-{secrets.token_hex(3)}"
    cocoond.call(
        "profile.create",
        {
            "name": name,
            "command": ["bash", "-l"],
            "resumeCommand": ["sh", "-c", 'echo "resumed $COCOON_AGENT_ID"; exec bash -l'],
        },
    )
    yield name
    cocoond.post("profile.delete", {"name": name})


def test_after_a_restart_agents_that_can_resume_are_resumed_and_the_others_say_why_they_ended(
    cocoond, sandbox, docker_client, resumable
):
    assert cocoond.call("settings.get")["agents"]["resumeAfterRestart"] is True
    marker = f"before-{secrets.token_hex(4)}"
    plain = spawn(cocoond, sandbox, f"echo {marker}")
    resuming = spawn(cocoond, sandbox, "echo working", profile=resumable)
    wait_until(lambda: shows(cocoond, plain, f"\n{marker}"))
    # What a restart leaves is what the poller last saw: idle at its prompt, after the marker.
    cocoond.call("agent.wait", {"agentId": plain["id"], "until": ["idle"], "timeoutS": 30})
    restart_under_cocoon(docker_client, sandbox)

    row = ended(cocoond, plain)
    assert (row["exitReason"], row["exitCode"]) == ("engine_restarted", None)
    assert f"\n{marker}" in cocoond.call("agent.read", {"agentId": plain["id"]})["screen"]

    wait_until(lambda: shows(cocoond, resuming, f"resumed {resuming['id']}"), timeout=30)
    row = agent_row(cocoond, resuming)
    assert row["status"] != "exited"
    assert row["exitReason"] is None
    keys = [entry["key"] for entry in cocoond.call("activity.list", {"agentId": resuming["id"]})]
    assert keys.count("agent.resumed") == 1
    assert "agent.spawned" in keys  # same agent, history kept
    # It takes input as before.
    cocoond.call("agent.send_input", {"agentId": resuming["id"], "text": "echo after-resume"})
    wait_until(lambda: shows(cocoond, resuming, "\nafter-resume"))


def test_with_resume_turned_off_no_agent_is_resumed(start_cocoond, sandbox_image, docker_client):
    cocoond = start_cocoond()
    cocoond.call("settings.update", {"agents": {"resumeAfterRestart": False}})
    sandbox = cocoond.call("sandbox.create", {"network": "none"})
    name = "resumable"
    cocoond.call("profile.create", {"name": name, "command": ["bash"], "resumeCommand": ["bash"]})
    agent = spawn(cocoond, sandbox, "echo hi", profile=name)
    wait_until(lambda: shows(cocoond, agent, "\nhi"))
    restart_under_cocoon(docker_client, sandbox)
    assert ended(cocoond, agent)["exitReason"] == "engine_restarted"
    bad = cocoond.post("settings.update", {"agents": {"resumeAfterRestart": "yes"}}).json()
    assert bad["error"]["code"] == "invalid_params"
    cocoond.call("sandbox.delete", {"sandboxId": sandbox["id"]})


def test_the_built_in_agents_resume_with_their_own_continue_commands(cocoond):
    profiles = {profile["name"]: profile for profile in cocoond.call("profile.list")}
    assert profiles["claude-code"]["resumeCommand"] == ["claude", "--continue"]
    assert profiles["codex"]["resumeCommand"] == ["codex", "resume", "--last"]
    assert profiles["shell"]["resumeCommand"] == []
