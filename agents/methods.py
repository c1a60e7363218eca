"""RPC methods of agents."""

from typing import Any

from agents import services
from agents.choices import AgentStatus, StatusSource
from cocoon.registry import Call, registry
from cocoon.schema import (
    BOOLEAN,
    EMPTY,
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
from sandboxes.methods.lifecycle import SANDBOX_ID

AGENT_ID = string(pattern="^ag_[a-z0-9]+$", maxLength=40)
AGENT = obj(
    {
        "id": STRING,
        "sandboxId": STRING,
        "profile": STRING,
        "status": enum(*AgentStatus.values),
        "statusSource": enum(*StatusSource.values),
        "exitCode": nullable(INTEGER),
        "createdAt": TIMESTAMP,
        "lastActivityAt": TIMESTAMP,
    }
)
BY_ID = obj({"agentId": AGENT_ID}, required=("agentId",))


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
            "env": {
                "type": "object",
                "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                "additionalProperties": STRING,
            },
            "providers": array(string(pattern="^[a-z0-9][a-z0-9-]{0,31}$"), maxItems=10, uniqueItems=True),
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
    description="Agents, optionally of one sandbox.",
    params=obj({"sandboxId": SANDBOX_ID}),
    result=array(AGENT),
    agent_side=True,
)
def agent_list(call: Call) -> list[dict[str, Any]]:
    return [services.serialize(agent) for agent in services.list_agents(call.params.get("sandboxId"))]


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
        {"agentId": AGENT_ID, "keys": array(string(maxLength=20), minItems=1, maxItems=50)},
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
    description="The agent's screen as text, and scrollback lines when asked.",
    params=obj(
        {"agentId": AGENT_ID, "scrollback": integer(minimum=0, maximum=100_000)}, required=("agentId",)
    ),
    result=obj({"screen": STRING, "scrollback": STRING}),
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
    return services.serialize(services.wait_for(params["agentId"], params["until"], params["timeoutS"]))


@registry.method(
    "agent.kill", description="End the agent's tmux session.", params=BY_ID, result=AGENT, agent_side=True
)
def agent_kill(call: Call) -> dict[str, Any]:
    return services.serialize(services.kill_agent(call.params["agentId"], actor=call.actor))
