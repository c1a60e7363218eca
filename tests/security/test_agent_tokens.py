"""An agent-scoped token reads only what its methods could read: events and activity carry a visibility,
and settings, egress, secrets and tokens are for admins (issue #13, item 5)."""

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from cocoon import activity, events
from cocoon.choices import TokenScope
from cocoon.tokens import create_token
from sandboxes.models import Sandbox
from server.asgi import application
from tests.test_mcp import run as run_mcp

# Event types an agent token's methods cannot read (settings.get, egress.denied, image.status and
# toolbox.status are admin methods), and one no module declares: undeclared means admin-only.
ADMIN_ONLY_EVENTS = ["settings.updated", "egress.denied", "image.build", "toolbox.install", "never.declared"]
ADMIN_ONLY_ACTIVITY = {"settings.updated", "secret.set", "token.created"}


async def subscribed(plain: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, f"/v1/ws?token={plain}")
    connected, _subprotocol = await communicator.connect()
    assert connected
    await communicator.send_json_to({"id": 1, "method": "events.subscribe", "params": {}})
    assert "result" in await communicator.receive_json_from(timeout=10)
    return communicator


def seen(frame: dict) -> str:
    event = frame["event"]
    return event["data"]["key"] if event["type"] == "activity" else event["type"]


@pytest.mark.django_db(transaction=True)
def test_an_agent_token_hears_none_of_the_admin_events_an_admin_token_hears():
    _token, agent_plain = create_token("sec-agent", TokenScope.AGENT)
    _token, admin_plain = create_token("sec-admin", TokenScope.ADMIN)
    # A sandbox of the agent token's project: it hears only its own sandboxes' events (tenancy).
    Sandbox.objects.create(id="sb_a", name="a", image="i", network="none", cpus=1, memory_mb=64, pids=16)
    publish = database_sync_to_async(events.publish)
    record = database_sync_to_async(activity.record)

    async def scenario():
        agent, admin = await subscribed(agent_plain), await subscribed(admin_plain)
        for event_type in ADMIN_ONLY_EVENTS:
            await publish(event_type, {"leak": event_type})
        for key in sorted(ADMIN_ONLY_ACTIVITY):
            await record(key, {"name": "X", "keys": "x", "scope": "agent"})
        # Agent-visible ones, last: once the agent hears them, it would have heard the others before.
        await publish("sandbox.updated", {"id": "sb_a"}, sandbox_id="sb_a")
        await record("sandbox.created", {"name": "a"}, sandbox_id="sb_a")
        admin_heard = [seen(await admin.receive_json_from(timeout=10)) for _ in range(10)]
        agent_heard = [seen(await agent.receive_json_from(timeout=10)) for _ in range(2)]
        agent_heard_nothing_more = await agent.receive_nothing(timeout=0.3)
        await agent.disconnect()
        await admin.disconnect()
        return admin_heard, agent_heard, agent_heard_nothing_more

    admin_heard, agent_heard, agent_heard_nothing_more = asyncio.run(scenario())
    agent_visible = ["sandbox.updated", "sandbox.created"]
    assert admin_heard == [*ADMIN_ONLY_EVENTS, *sorted(ADMIN_ONLY_ACTIVITY), *agent_visible]
    assert agent_heard == agent_visible
    assert agent_heard_nothing_more


def heard_until(ws, sentinel: str) -> list[str]:
    """What a live subscription hears up to and including the activity entry `sentinel`."""
    heard: list[str] = []
    while sentinel not in heard:
        heard.append(seen(ws.next_event(timeout=30)))
    return heard


def test_an_agent_token_neither_hears_nor_lists_settings_secret_or_token_activity(cocoond):
    agent = cocoond.call("tokens.create", {"name": "sec-agent-activity", "scope": "agent"})["token"]
    with cocoond.ws(token=agent) as agent_ws, cocoond.ws() as admin_ws:
        for ws in (agent_ws, admin_ws):
            ws.call("events.subscribe", {"types": ["activity", "settings.updated"]})
        cocoond.call("settings.update", {"general": {"language": "en"}})
        cocoond.call("secrets.set", {"name": "SEC_AGENT_TOKENS", "value": "s3cret"})
        cocoond.call("tokens.create", {"name": "sec-another", "scope": "agent"})
        # An agent-visible entry last: whoever hears it would have heard the ones before.
        cocoond.call("profile.create", {"name": "sec-visible", "command": ["bash"]})
        admin_heard = heard_until(admin_ws, "profile.created")
        agent_heard = heard_until(agent_ws, "profile.created")
    assert set(admin_heard) >= ADMIN_ONLY_ACTIVITY
    assert set(agent_heard) & ADMIN_ONLY_ACTIVITY == set()

    def keys(token: str | None) -> set[str]:
        return {entry["key"] for entry in cocoond.call("activity.list", {"limit": 500}, token=token)}

    assert {*ADMIN_ONLY_ACTIVITY, "profile.created"} <= keys("admin")
    assert keys(agent) & ADMIN_ONLY_ACTIVITY == set()
    assert "profile.created" in keys(agent)  # agent-visible entries still come through

    async def list_activity(session):
        return await session.call_tool("activity_list", {"limit": 500})

    over_mcp = run_mcp(cocoond, list_activity, token=agent).structured_content["result"]
    assert {entry["key"] for entry in over_mcp} & ADMIN_ONLY_ACTIVITY == set()
    cocoond.call("profile.delete", {"name": "sec-visible"})
