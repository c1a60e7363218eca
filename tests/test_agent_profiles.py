"""profile.* through the registry: built-ins editable and resettable, custom ones, validation, admin only."""

import pytest

from agents.models import Agent
from cocoon.actors import Actor
from cocoon.errors import CocoonError
from cocoon.registry import registry
from sandboxes.models import Sandbox

pytestmark = pytest.mark.django_db

ADMIN = Actor("tok_a", "admin", "admin")
AGENT = Actor("tok_b", "agent", "agent")


def call(method, actor=ADMIN, **params):
    return registry.dispatch(method, params, actor, "en")


def refused(method, actor=ADMIN, **params):
    with pytest.raises(CocoonError) as error:
        call(method, actor, **params)
    return error.value


def test_the_built_ins_are_listed_and_readable_by_agent_tokens():
    listed = {profile["name"]: profile for profile in call("profile.list", AGENT)}
    assert {"claude-code", "codex", "shell"} <= set(listed)
    assert listed["claude-code"]["builtin"] is True
    assert call("profile.get", AGENT, name="codex")["command"] == ["codex"]
    assert refused("profile.get", name="nope").code == "not_found"


def test_a_built_in_is_edited_and_reset_to_its_definition():
    original = call("profile.get", name="claude-code")
    changed = call(
        "profile.update", name="claude-code", command=["claude", "--verbose"], blockedPatterns=["Proceed\\?"]
    )
    assert (changed["command"], changed["blockedPatterns"]) == (["claude", "--verbose"], ["Proceed\\?"])
    assert changed["env"] == original["env"]  # untouched fields stay
    assert call("profile.get", name="claude-code") == changed
    assert call("profile.reset", name="claude-code") == original


def test_writes_need_an_admin_token():
    assert refused("profile.update", AGENT, name="shell", hooks=True).code == "forbidden"
    assert refused("profile.reset", AGENT, name="shell").code == "forbidden"
    assert refused("profile.create", AGENT, name="mine", command=["x"]).code == "forbidden"
    assert call("profile.get", name="shell")["hooks"] is False


@pytest.mark.parametrize(
    ("params", "path", "code"),
    [
        ({"command": []}, "command", "minItems"),
        ({"command": [""]}, "command.0", "minLength"),
        ({"promptMode": "telepathy"}, "promptMode", "enum"),
        ({"workingPattern": "esc to (interrupt"}, "workingPattern", "regex"),
        ({"blockedPatterns": ["fine", "[unclosed"]}, "blockedPatterns.1", "regex"),
        ({"env": {"1BAD": "x"}}, "env", "pattern"),
        ({"colour": "red"}, "colour", "unknown_field"),
    ],
)
def test_bad_fields_are_refused_with_their_path(params, path, code):
    error = refused("profile.update", name="codex", **params)
    assert error.code == "invalid_params"
    assert [(field["path"], field["code"]) for field in error.details["fields"]] == [(path, code)]
    assert call("profile.get", name="codex")["promptMode"] == "argument"  # nothing was saved


def test_custom_profiles_are_created_and_deleted_but_never_built_ins():
    created = call("profile.create", name="aider", command=["aider", "--no-git"], workingPattern="Thinking")
    assert (created["builtin"], created["promptMode"], created["hooks"]) == (False, "typed", False)
    assert refused("profile.create", name="aider", command=["aider"]).code == "conflict"
    assert refused("profile.reset", name="aider").code == "conflict"
    assert refused("profile.delete", name="shell").code == "conflict"
    sandbox = Sandbox.objects.create(name="s", image="i", network="none", cpus=1, memory_mb=64, pids=16)
    agent = Agent.objects.create(sandbox=sandbox, profile="aider", status="working")
    assert refused("profile.delete", name="aider").code == "conflict"  # still in use
    Agent.objects.filter(pk=agent.pk).update(status="exited")
    assert call("profile.delete", name="aider") == {}
    assert "aider" not in {profile["name"] for profile in call("profile.list")}


def test_a_resume_picks_up_exactly_the_cli_session_when_the_profile_says_how():
    from agents.profiles import get_profile, resume_command

    claude, codex = get_profile("claude-code"), get_profile("codex")
    assert resume_command(claude, "0b0e4e6c-1c4f") == ["claude", "--resume", "0b0e4e6c-1c4f"]
    assert resume_command(codex, "019a-beef") == ["codex", "resume", "019a-beef"]
    assert resume_command(claude, "") == ["claude", "--continue"]  # no session known: the last one
    changed = call("profile.update", name="codex", resumeSessionCommand=[])
    assert changed["resumeSessionCommand"] == []
    assert resume_command(get_profile("codex"), "019a-beef") == ["codex", "resume", "--last"]


@pytest.mark.django_db
def test_the_checklist_names_each_profile_whose_provider_has_no_key_until_one_is_set():
    from agents.setup import profiles_without_provider
    from cocoon import setup, vault
    from cocoon.actors import SYSTEM_ACTOR

    def providers_item():
        return next(result for result in setup.run_checks() if result.check.key == "providers")

    missing = {profile.name for profile in profiles_without_provider()}
    assert {"claude-code", "codex"} <= missing
    item = providers_item()
    assert item.ok is False
    assert "claude-code (ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN)" in str(item.detail)
    vault.set_secret("ANTHROPIC_API_KEY", "sk-ant-checklist-0123456789", actor=SYSTEM_ACTOR)
    missing = {profile.name for profile in profiles_without_provider()}
    assert "claude-code" not in missing
    assert "codex" in missing
    vault.set_secret("OPENAI_API_KEY", "sk-openai-checklist-0123456789", actor=SYSTEM_ACTOR)
    assert providers_item().ok is True


@pytest.mark.django_db
def test_a_spawn_of_a_profile_without_a_provider_key_is_warned_before_its_agent_fails():
    from agents.models import AgentProfile
    from agents.setup import spawn_warnings
    from cocoon import vault
    from cocoon.actors import SYSTEM_ACTOR

    profile = AgentProfile(name="needs-a-key", command=["claude"], secrets=["ANTHROPIC_API_KEY"])
    (warning,) = spawn_warnings(profile, None, None)
    assert "needs-a-key (ANTHROPIC_API_KEY)" in str(warning)
    assert "Settings → Providers" in str(warning)
    assert spawn_warnings(profile, {"ANTHROPIC_API_KEY": "sk-own-0123456789"}, None) == []  # its own key
    assert spawn_warnings(AgentProfile(name="plain", command=["sh"], secrets=[]), None, None) == []
    vault.set_secret("ANTHROPIC_API_KEY", "sk-ant-warning-0123456789", actor=SYSTEM_ACTOR)
    assert spawn_warnings(profile, None, None) == []
