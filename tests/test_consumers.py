"""The /v1/ws consumer in-process (WebsocketCommunicator) and the event filters."""

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from cocoon import events
from cocoon.choices import TokenScope
from cocoon.tokens import create_token
from sandboxes.models import Sandbox
from server.asgi import application


def event(event_type: str, sandbox_id: str | None = None, agent_id: str | None = None) -> events.Event:
    built = events.Event(id="ev_x", type=event_type, at="", data={})
    if sandbox_id:
        built["sandboxId"] = sandbox_id
    if agent_id:
        built["agentId"] = agent_id
    return built


@pytest.mark.parametrize(
    ("subscription", "expected"),
    [
        ({}, [True, True, True]),
        ({"types": ["agent.updated"]}, [False, True, True]),
        ({"sandboxId": "sb_1"}, [True, True, False]),
        ({"agentId": "ag_1"}, [False, True, False]),
        ({"sandboxId": "sb_1", "types": ["sandbox.updated"]}, [True, False, False]),
    ],
)
def test_subscription_filters(subscription, expected):
    stream = [
        event("sandbox.updated", "sb_1"),
        event("agent.updated", "sb_1", "ag_1"),
        event("agent.updated", "sb_2"),
    ]
    assert [events.matches(subscription, item) for item in stream] == expected


@pytest.mark.django_db(transaction=True)
def test_a_subscription_by_sandbox_receives_only_that_sandboxs_events():
    _token, plain = create_token("ws", TokenScope.AGENT)
    for name in ("sb_a", "sb_b"):  # rows of the token's project: it hears only its own sandboxes' events
        Sandbox.objects.create(id=name, name=name, image="i", network="none", cpus=1, memory_mb=64, pids=16)

    async def scenario():
        communicator = WebsocketCommunicator(application, f"/v1/ws?token={plain}")
        connected, _subprotocol = await communicator.connect()
        assert connected
        await communicator.send_json_to(
            {"id": 1, "method": "events.subscribe", "params": {"sandboxId": "sb_a"}}
        )
        subscription = (await communicator.receive_json_from())["result"]["subscription"]
        publish = database_sync_to_async(events.publish)
        await publish("sandbox.updated", {"n": 1}, sandbox_id="sb_b")
        await publish("sandbox.updated", {"n": 2}, sandbox_id="sb_a")
        frame = await communicator.receive_json_from(timeout=5)
        assert frame["subscription"] == subscription
        assert frame["event"]["data"] == {"n": 2}
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()

    asyncio.run(scenario())
