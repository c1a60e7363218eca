"""The MCP endpoint with the official SDK's own Streamable HTTP client, against a live cocoond."""

import asyncio
import contextlib
import json

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import open_to


async def with_session(cocoond, token, action):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{cocoond.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await action(session)


def run(cocoond, action, token="admin"):
    return asyncio.run(with_session(cocoond, cocoond.token if token == "admin" else token, action))


def test_tools_are_the_agent_side_methods_and_never_admin_ones(cocoond):
    tools = run(cocoond, lambda session: session.list_tools())
    names = {tool.name for tool in tools.tools}
    catalogue = cocoond.call("system.methods")
    agent_side = {m["name"].replace(".", "_") for m in catalogue if m["agentSide"] and not m["wsOnly"]}
    admin = {m["name"].replace(".", "_") for m in catalogue if m["admin"]}
    assert names == agent_side
    assert {"sandbox_create", "sandbox_exec", "files_read", "sandbox_diff"} <= names
    assert not names & admin
    create = next(tool for tool in tools.tools if tool.name == "sandbox_create")
    assert create.input_schema["properties"]["network"]["enum"] == ["none", "egress", "open"]


def test_a_sandbox_is_driven_end_to_end_over_mcp_with_an_agent_token(cocoond, sandbox_image):
    agent = cocoond.call("tokens.create", {"name": "mcp-agent", "scope": "agent"})["token"]

    async def flow(session):
        created = await session.call_tool("sandbox_create", {"network": "none"})
        assert not created.is_error, created
        sandbox = created.structured_content["result"]
        executed = await session.call_tool(
            "sandbox_exec",
            {"sandboxId": sandbox["id"], "command": ["sh", "-c", "echo from-mcp > f && cat f"]},
        )
        diff = await session.call_tool("sandbox_diff", {"sandboxId": sandbox["id"]})
        await session.call_tool("sandbox_delete", {"sandboxId": sandbox["id"]})
        return executed, diff

    executed, diff = run(cocoond, flow, token=agent)
    assert executed.structured_content["result"]["stdout"] == "from-mcp\n"
    assert json.loads(executed.content[0].text)["exitCode"] == 0
    assert [entry["path"] for entry in diff.structured_content["result"]["files"]] == ["f"]


def test_one_tokens_waits_hold_up_no_other_tokens_tool_calls(cocoond, sandbox_image):
    # Tool calls ran in the event loop's default executor (min(32, CPUs + 4) threads), which a few
    # agent_wait calls filled; now one token has at most calls.PER_CALLER threads of the RPC pool.
    sandbox = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
    other = cocoond.call("tokens.create", {"name": "other", "scope": "agent"})["token"]
    waits = 40

    async def waiting(session):
        params = {"agentId": agent["id"], "until": ["blocked"], "timeoutS": 60}
        return await asyncio.gather(*(session.call_tool("agent_wait", params) for _ in range(waits)))

    async def flow():
        waiting_task = asyncio.ensure_future(with_session(cocoond, cocoond.token, waiting))
        await asyncio.sleep(2)  # the waits are in by then (on the old code they held every thread)
        got = await asyncio.wait_for(
            with_session(
                cocoond, other, lambda session: session.call_tool("agent_get", {"agentId": agent["id"]})
            ),
            timeout=15,
        )
        await asyncio.to_thread(cocoond.call, "agent.kill", {"agentId": agent["id"]})
        return got, await asyncio.wait_for(waiting_task, timeout=60)

    try:
        got, answers = asyncio.run(flow())
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
    assert got.structured_content["result"]["id"] == agent["id"]
    assert len(answers) == waits
    assert {json.loads(answer.content[0].text)["error"]["code"] for answer in answers} == {"timeout"}


def test_admin_tools_are_refused_and_errors_are_tool_errors(cocoond):
    async def calls(session):
        hidden = await session.call_tool("settings_update", {"general": {"language": "de"}})
        wrong = await session.call_tool("sandbox_get", {"sandboxId": 5})
        return hidden, wrong

    hidden, wrong = run(cocoond, calls)
    assert hidden.is_error
    assert json.loads(hidden.content[0].text)["error"]["code"] == "not_found"
    assert cocoond.call("settings.get")["general"]["language"] == "en"
    assert wrong.is_error
    assert json.loads(wrong.content[0].text)["error"]["code"] == "invalid_params"


@pytest.mark.parametrize("token", [None, "cct_not_a_token"])
def test_mcp_needs_a_valid_token(cocoond, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.post(
        f"{cocoond.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers=headers | {"Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


class Relay:
    """A TCP relay from an address on a test network to cocoond on loopback (cocoond binds loopback)."""

    def __init__(self, host: str, target_port: int) -> None:
        import socket
        import threading

        self.server = socket.create_server((host, 0))
        self.port = self.server.getsockname()[1]

        def pipe(source: socket.socket, sink: socket.socket) -> None:
            with contextlib.suppress(OSError):  # either side may close first
                while data := source.recv(65536):
                    sink.sendall(data)
            for end in (source, sink):
                end.close()

        def serve() -> None:
            while True:
                try:
                    client, _address = self.server.accept()
                except OSError:
                    return
                upstream = socket.create_connection(("127.0.0.1", target_port))
                threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
                threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()

    def close(self) -> None:
        self.server.close()


@pytest.mark.e2e
def test_claude_code_lists_cocoon_as_a_connected_mcp_server(toolbox_cocoond, docker_client):
    cocoond = toolbox_cocoond
    gateway = docker_client.networks.get(f"{cocoond.instance}-outbound").attrs["IPAM"]["Config"][0]["Gateway"]
    relay = Relay(gateway, cocoond.port)
    agent_token = cocoond.call("tokens.create", {"name": "claude-mcp", "scope": "agent"})["token"]
    sandbox = cocoond.call("sandbox.create", {"network": "open"})
    try:
        with open_to(cocoond, gateway):
            script = (
                f'claude mcp add --transport http cocoon "http://{gateway}:{relay.port}/mcp" '
                '--header "Authorization: Bearer $TOKEN" '
                # The relay stands in for cocoond's own address, which is not one of its host names.
                f'--header "Host: localhost:{cocoond.port}" >/dev/null && claude mcp list'
            )
            result = cocoond.call(
                "sandbox.exec",
                {
                    "sandboxId": sandbox["id"],
                    "command": ["sh", "-c", script],
                    "env": {"TOKEN": agent_token},
                    "timeoutS": 60,
                },
            )
            assert result["exitCode"] == 0, result
            assert "cocoon" in result["stdout"]
            assert "Connected" in result["stdout"], result["stdout"]
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
        relay.close()
