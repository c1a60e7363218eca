"""RPC methods of agents."""

from typing import Any

from django.utils import translation
from django.utils.translation import gettext_lazy as _

from agents import poller, profiles, services, tmux
from agents.choices import AgentStatus
from agents.schemas import (
    AGENT,
    AGENT_BY_ID,
    AGENT_ID,
    AGENT_NAME,
    EXPLANATION,
    PROFILE,
    PROFILE_BY_NAME,
    PROFILE_FIELDS,
    PROFILE_NAME,
    SCREEN,
    serialize_agent,
    serialize_explanation,
    serialize_profile,
    serialize_screen,
)
from agents.setup import lacks_provider, spawn_warnings
from cocoon.errors import Timeout
from cocoon.registry import Call, registry
from cocoon.schema import (
    BOOLEAN,
    BUDGET,
    EMPTY,
    ENV,
    STRING,
    array,
    enum,
    integer,
    obj,
    string,
)
from cocoon.schemas import CEILINGS
from cocoon.settings_schema import PROVIDER_ID_PATTERN
from sandboxes.schemas import SANDBOX_ID


@registry.method(
    "agent.spawn",
    description="Start an agent (profile: claude-code, codex, shell, ...) in a tmux session of a running "
    "sandbox, optionally with a first prompt, providers and a model. Secrets of the profile reach it "
    "through a private env file; behind the credential proxy, provider keys only as placeholders. "
    "steering: the agent gets its own token (COCOON_URL, COCOON_TOKEN) that creates and sees only its own "
    "sandboxes, within these ceilings and never beyond its parent's (no wider network than its sandbox's, "
    "only its providers, no more CPUs or memory than its sandbox), its budget carved out of the spawner's "
    "if the spawner's token has a budget ceiling; the token ends with the agent.",
    params=obj(
        {
            "sandboxId": SANDBOX_ID,
            "profile": string(minLength=1, maxLength=64),
            "name": AGENT_NAME,  # else its prompt's first words, or its profile's name
            "prompt": string(maxLength=100_000),
            "env": ENV,
            "providers": array(string(pattern=PROVIDER_ID_PATTERN), maxItems=10, uniqueItems=True),
            "model": string(minLength=1, maxLength=200),
            "cols": integer(minimum=20, maximum=500),
            "rows": integer(minimum=5, maximum=300),
            "budget": BUDGET,
            "steering": CEILINGS,
        },
        required=("sandboxId", "profile"),
    ),
    # warnings: what the agent will meet that the caller can fix now (no provider key), translated.
    result=AGENT | {"properties": AGENT["properties"] | {"warnings": array(STRING)}},
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
        budget=params.get("budget"),
        steering=params.get("steering"),
        name=params.get("name"),
        cols=params.get("cols", 120),
        rows=params.get("rows", 40),
    )
    warnings = spawn_warnings(
        profiles.get_profile(params["profile"]), params.get("env"), params.get("providers")
    )
    with translation.override(call.language):
        return serialize_agent(agent) | {"warnings": [str(warning) for warning in warnings]}


@registry.method(
    "agent.list",
    reads=True,
    description="Agents, optionally of one sandbox and only in some statuses.",
    params=obj({"sandboxId": SANDBOX_ID, "status": array(enum(*AgentStatus.values), maxItems=10)}),
    result=array(AGENT),
    agent_side=True,
)
def agent_list(call: Call) -> list[dict[str, Any]]:
    agents = services.list_agents(call.actor, call.params.get("sandboxId"), call.params.get("status"))
    return [serialize_agent(agent) for agent in agents]


@registry.method(
    "agent.get", reads=True, description="One agent.", params=AGENT_BY_ID, result=AGENT, agent_side=True
)
def agent_get(call: Call) -> dict[str, Any]:
    return serialize_agent(services.get_agent(call.params["agentId"]))


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
    reads=True,
    description=(
        "The agent's screen as text, and scrollback lines when asked. Of an agent that is gone: the last "
        "screen cocoon kept (lastKnown, capturedAt), with at most 200 lines of scrollback."
    ),
    params=obj(
        {"agentId": AGENT_ID, "scrollback": integer(minimum=0, maximum=100_000)}, required=("agentId",)
    ),
    result=SCREEN,
    agent_side=True,
)
def agent_read(call: Call) -> dict[str, Any]:
    return serialize_screen(services.read_screen(call.params["agentId"], call.params.get("scrollback", 0)))


@registry.method(
    "agent.wait",
    reads=True,
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
    agent = poller.wait_for(params["agentId"], params["until"], params["timeoutS"])
    if agent.status not in params["until"]:
        raise Timeout(
            _("Agent %(id)s did not reach %(until)s; it is %(status)s."),
            details={"agent": serialize_agent(agent)},
            id=agent.id,
            until=", ".join(params["until"]),
            status=agent.status,
        )
    return serialize_agent(agent)


@registry.method(
    "agent.rename",
    description="Give an agent another name; its id stays the same.",
    params=obj({"agentId": AGENT_ID, "name": AGENT_NAME}, required=("agentId", "name")),
    result=AGENT,
    agent_side=True,
)
def agent_rename(call: Call) -> dict[str, Any]:
    return serialize_agent(
        services.rename_agent(call.params["agentId"], call.params["name"], actor=call.actor)
    )


@registry.method(
    "agent.kill",
    description="End the agent's tmux session.",
    params=AGENT_BY_ID,
    result=AGENT,
    agent_side=True,
)
def agent_kill(call: Call) -> dict[str, Any]:
    return serialize_agent(services.kill_agent(call.params["agentId"], actor=call.actor))


@registry.method(
    "agent.explain",
    reads=True,
    description="Why the agent has its status: the rule that decided (hook report, foreground process, "
    "question on screen, working indicator, start-up grace, quiet screen ...) and what the last poll saw.",
    params=AGENT_BY_ID,
    result=EXPLANATION,
    agent_side=True,
)
def agent_explain(call: Call) -> dict[str, Any]:
    return serialize_explanation(services.explain_agent(call.params["agentId"]), call.language)


# -- profiles ----------------------------------------------------------------------------------------


@registry.method(
    "profile.list",
    reads=True,
    description="Agent profiles: the built-ins (claude-code, codex, shell) and custom ones; providerMissing: "
    "its CLI needs an LLM provider and none has its key (a spawn's agent could not log in).",
    result=array(PROFILE | {"properties": PROFILE["properties"] | {"providerMissing": BOOLEAN}}),
    agent_side=True,
)
def profile_list(call: Call) -> list[dict[str, Any]]:
    listed = profiles.list_profiles()
    return [serialize_profile(profile) | {"providerMissing": lacks_provider(profile)} for profile in listed]


@registry.method(
    "profile.get",
    reads=True,
    description="One agent profile.",
    params=PROFILE_BY_NAME,
    result=PROFILE,
    agent_side=True,
)
def profile_get(call: Call) -> dict[str, Any]:
    return serialize_profile(profiles.get_profile(call.params["name"]))


@registry.method(
    "profile.create",
    description="Create a custom agent profile.",
    params=obj({"name": PROFILE_NAME, **PROFILE_FIELDS}, required=("name", "command")),
    result=PROFILE,
    admin=True,
)
def profile_create(call: Call) -> dict[str, Any]:
    fields = {key: value for key, value in call.params.items() if key != "name"}
    return serialize_profile(profiles.create_profile(call.params["name"], fields, actor=call.actor))


@registry.method(
    "profile.update",
    description="Change fields of an agent profile (built-in or custom); returns the whole profile.",
    params=obj({"name": PROFILE_NAME, **PROFILE_FIELDS}, required=("name",)),
    result=PROFILE,
    admin=True,
)
def profile_update(call: Call) -> dict[str, Any]:
    fields = {key: value for key, value in call.params.items() if key != "name"}
    return serialize_profile(profiles.update_profile(call.params["name"], fields, actor=call.actor))


@registry.method(
    "profile.reset",
    description="Reset a built-in agent profile to its built-in definition.",
    params=PROFILE_BY_NAME,
    result=PROFILE,
    admin=True,
)
def profile_reset(call: Call) -> dict[str, Any]:
    return serialize_profile(profiles.reset_profile(call.params["name"], actor=call.actor))


@registry.method(
    "profile.delete",
    description="Delete a custom agent profile no running agent uses.",
    params=PROFILE_BY_NAME,
    result=EMPTY,
    admin=True,
)
def profile_delete(call: Call) -> dict[str, Any]:
    profiles.delete_profile(call.params["name"], actor=call.actor)
    return {}
