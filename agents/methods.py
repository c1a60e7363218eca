"""RPC methods of agents."""

from typing import Any

from agents import poller, profiles, services, tmux
from agents.choices import AgentStatus, ExitReason, PromptMode, StatusRule, StatusSource
from cocoon.config import PROVIDER_ID_PATTERN, SECRET_NAME_PATTERN
from cocoon.registry import Call, registry
from cocoon.schema import (
    BOOLEAN,
    EMPTY,
    ENV,
    INTEGER,
    STRING,
    TIMESTAMP,
    array,
    enum,
    integer,
    nullable,
    obj,
    string,
)
from sandboxes.schemas import SANDBOX_ID

AGENT_ID = string(pattern="^ag_[a-z0-9]+$", maxLength=40)
AGENT = obj(
    {
        "id": STRING,
        "sandboxId": STRING,
        "profile": STRING,
        "status": enum(*AgentStatus.values),
        "statusSource": enum(*StatusSource.values),
        "exitCode": nullable(INTEGER),
        "exitReason": nullable(enum(*ExitReason.values)),
        "createdAt": TIMESTAMP,
        "lastActivityAt": TIMESTAMP,
    }
)
BY_ID = obj({"agentId": AGENT_ID}, required=("agentId",))
PROFILE_NAME = string(pattern="^[a-z0-9][a-z0-9-]{0,63}$")
# What a profile says; patterns are regular expressions (checked to compile on save).
PROFILE_FIELDS = {
    "command": array(string(minLength=1, maxLength=4000), minItems=1, maxItems=100),
    "promptMode": enum(*PromptMode.values),
    "env": ENV,
    "secrets": array(string(pattern=SECRET_NAME_PATTERN), maxItems=50),
    "hooks": BOOLEAN,
    "workingPattern": string(maxLength=200),
    "blockedPatterns": array(string(minLength=1, maxLength=500), maxItems=50),
    "defaultModel": string(maxLength=200),
    "resumeCommand": array(string(minLength=1, maxLength=4000), maxItems=100),
}
PROFILE = obj({"name": STRING, **PROFILE_FIELDS, "builtin": BOOLEAN})
BY_NAME = obj({"name": PROFILE_NAME}, required=("name",))


@registry.method(
    "agent.spawn",
    description="Start an agent (profile: claude-code, codex, shell, ...) in a tmux session of a running "
    "sandbox, optionally with a first prompt, providers and a model. Secrets of the profile reach it "
    "through a private env file; behind the credential proxy, provider keys only as placeholders.",
    params=obj(
        {
            "sandboxId": SANDBOX_ID,
            "profile": string(minLength=1, maxLength=64),
            "prompt": string(maxLength=100_000),
            "env": ENV,
            "providers": array(string(pattern=PROVIDER_ID_PATTERN), maxItems=10, uniqueItems=True),
            "model": string(minLength=1, maxLength=200),
            "cols": integer(minimum=20, maximum=500),
            "rows": integer(minimum=5, maximum=300),
        },
        required=("sandboxId", "profile"),
    ),
    result=AGENT,
    agent_side=True,
)
def agent_spawn(call: Call) -> dict[str, Any]:
    params = call.params
    agent = services.spawn_agent(
        params["sandboxId"],
        params["profile"],
        actor=call.actor,
        prompt=params.get("prompt"),
        env=params.get("env"),
        providers=params.get("providers"),
        model=params.get("model"),
        cols=params.get("cols", 120),
        rows=params.get("rows", 40),
    )
    return services.serialize(agent)


@registry.method(
    "agent.list",
    description="Agents, optionally of one sandbox and only in some statuses.",
    params=obj({"sandboxId": SANDBOX_ID, "status": array(enum(*AgentStatus.values), maxItems=10)}),
    result=array(AGENT),
    agent_side=True,
)
def agent_list(call: Call) -> list[dict[str, Any]]:
    agents = services.list_agents(call.params.get("sandboxId"), call.params.get("status"))
    return [services.serialize(agent) for agent in agents]


@registry.method("agent.get", description="One agent.", params=BY_ID, result=AGENT, agent_side=True)
def agent_get(call: Call) -> dict[str, Any]:
    return services.serialize(services.get_agent(call.params["agentId"]))


@registry.method(
    "agent.send_input",
    description="Type text into the agent's terminal, followed by Enter unless enter is false.",
    params=obj(
        {"agentId": AGENT_ID, "text": string(maxLength=100_000), "enter": BOOLEAN},
        required=("agentId", "text"),
    ),
    result=EMPTY,
    agent_side=True,
)
def agent_send_input(call: Call) -> dict[str, Any]:
    params = call.params
    services.send_input(params["agentId"], params["text"], actor=call.actor, enter=params.get("enter", True))
    return {}


@registry.method(
    "agent.send_keys",
    description="Press named keys: Enter, Escape, Tab, Up, Down, C-c, y, n, ...",
    params=obj(
        {"agentId": AGENT_ID, "keys": array(enum(*sorted(tmux.KEYS)), minItems=1, maxItems=50)},
        required=("agentId", "keys"),
    ),
    result=EMPTY,
    agent_side=True,
)
def agent_send_keys(call: Call) -> dict[str, Any]:
    services.send_keys(call.params["agentId"], call.params["keys"], actor=call.actor)
    return {}


@registry.method(
    "agent.read",
    description=(
        "The agent's screen as text, and scrollback lines when asked. Of an agent that is gone: the last "
        "screen cocoon kept (lastKnown, capturedAt), with at most 200 lines of scrollback."
    ),
    params=obj(
        {"agentId": AGENT_ID, "scrollback": integer(minimum=0, maximum=100_000)}, required=("agentId",)
    ),
    result=obj(
        {"screen": STRING, "scrollback": STRING, "lastKnown": BOOLEAN, "capturedAt": nullable(TIMESTAMP)}
    ),
    agent_side=True,
)
def agent_read(call: Call) -> dict[str, Any]:
    return services.read_screen(call.params["agentId"], call.params.get("scrollback", 0))


@registry.method(
    "agent.wait",
    description="Block (bounded by timeoutS) until the agent reaches one of the statuses.",
    params=obj(
        {
            "agentId": AGENT_ID,
            "until": array(enum(*AgentStatus.values), minItems=1),
            "timeoutS": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
        },
        required=("agentId", "until", "timeoutS"),
    ),
    result=AGENT,
    agent_side=True,
)
def agent_wait(call: Call) -> dict[str, Any]:
    params = call.params
    return services.serialize(poller.wait_for(params["agentId"], params["until"], params["timeoutS"]))


@registry.method(
    "agent.kill", description="End the agent's tmux session.", params=BY_ID, result=AGENT, agent_side=True
)
def agent_kill(call: Call) -> dict[str, Any]:
    return services.serialize(services.kill_agent(call.params["agentId"], actor=call.actor))


@registry.method(
    "agent.explain",
    description="Why the agent has its status: the rule that decided (hook report, foreground process, "
    "question on screen, working indicator, start-up grace, quiet screen ...) and what the last poll saw.",
    params=BY_ID,
    result=obj(
        {
            "agent": AGENT,
            "rule": enum(*StatusRule.values),
            "detail": STRING,
            "summary": STRING,
            "hook": nullable(obj({"status": STRING, "ageS": {"type": "number"}, "counts": BOOLEAN})),
            "screenQuietS": {"type": "number"},
            "workingIndicator": BOOLEAN,
            "question": STRING,
            "foreground": STRING,
            "startUpGraceS": {"type": "number"},
            "lastInputAt": nullable(TIMESTAMP),
        }
    ),
    agent_side=True,
)
def agent_explain(call: Call) -> dict[str, Any]:
    return services.explain_agent(call.params["agentId"], call.language)


# -- profiles ----------------------------------------------------------------------------------------


@registry.method(
    "profile.list",
    description="Agent profiles: the built-ins (claude-code, codex, shell) and custom ones.",
    result=array(PROFILE),
    agent_side=True,
)
def profile_list(call: Call) -> list[dict[str, Any]]:
    return [profiles.serialize_profile(profile) for profile in profiles.list_profiles()]


@registry.method(
    "profile.get", description="One agent profile.", params=BY_NAME, result=PROFILE, agent_side=True
)
def profile_get(call: Call) -> dict[str, Any]:
    return profiles.serialize_profile(profiles.get_profile(call.params["name"]))


@registry.method(
    "profile.create",
    description="Create a custom agent profile.",
    params=obj({"name": PROFILE_NAME, **PROFILE_FIELDS}, required=("name", "command")),
    result=PROFILE,
    admin=True,
)
def profile_create(call: Call) -> dict[str, Any]:
    fields = {key: value for key, value in call.params.items() if key != "name"}
    return profiles.serialize_profile(profiles.create_profile(call.params["name"], fields, actor=call.actor))


@registry.method(
    "profile.update",
    description="Change fields of an agent profile (built-in or custom); returns the whole profile.",
    params=obj({"name": PROFILE_NAME, **PROFILE_FIELDS}, required=("name",)),
    result=PROFILE,
    admin=True,
)
def profile_update(call: Call) -> dict[str, Any]:
    fields = {key: value for key, value in call.params.items() if key != "name"}
    return profiles.serialize_profile(profiles.update_profile(call.params["name"], fields, actor=call.actor))


@registry.method(
    "profile.reset",
    description="Reset a built-in agent profile to its built-in definition.",
    params=BY_NAME,
    result=PROFILE,
    admin=True,
)
def profile_reset(call: Call) -> dict[str, Any]:
    return profiles.serialize_profile(profiles.reset_profile(call.params["name"], actor=call.actor))


@registry.method(
    "profile.delete",
    description="Delete a custom agent profile no running agent uses.",
    params=BY_NAME,
    result=EMPTY,
    admin=True,
)
def profile_delete(call: Call) -> dict[str, Any]:
    profiles.delete_profile(call.params["name"], actor=call.actor)
    return {}
