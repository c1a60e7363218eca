"""Revocation ends live sessions: a revoked token's WebSockets, terminals and MCP calls end within about a
second, and every WebSocket call re-checks its token; logout and a password change end a user's UI
WebSocket, also when another process makes the change (issue #13, item 13)."""

import asyncio
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from cocoon.choices import TokenScope
from cocoon.models import ApiToken
from cocoon.tokens import create_token
from server.asgi import application
from tests.conftest import ROOT, server_env

CLOSE_UNAUTHORIZED = 4401


def frames_until_closed(ws, timeout: float = 10) -> tuple[list[str | bytes], ConnectionClosed]:
    """Every frame a connection still gets, and how it was closed (TimeoutError if it stays open)."""
    frames = []
    while True:
        try:
            frames.append(ws.recv(timeout=timeout))
        except ConnectionClosed as closed:
            return frames, closed


def test_a_revoked_tokens_websocket_is_closed_without_hearing_its_own_revocation(cocoond):
    revoked = cocoond.call("tokens.create", {"name": "sec-revoked", "scope": "admin"})
    with cocoond.ws(token=revoked["token"]) as ws:
        ws.call("events.subscribe", {})
        assert isinstance(ws.call("sandbox.list"), list)
        cocoond.call("tokens.revoke", {"tokenId": revoked["id"]})
        frames, closed = frames_until_closed(ws.connection)
    assert closed.rcvd.code == CLOSE_UNAUTHORIZED
    frames = [json.loads(frame) for frame in frames]
    # Daphne drops close reasons: the last frame says why.
    errors = [frame["error"] for frame in frames if "error" in frame]
    assert [error["code"] for error in errors] == ["unauthorized"]
    assert "revoked" in errors[0]["message"]
    heard = [frame["event"]["data"].get("key") for frame in frames if "event" in frame]
    assert "token.revoked" not in heard
    with cocoond.ws(token=revoked["token"]) as again:
        assert again.receive()["error"]["code"] == "token_revoked"


@pytest.mark.django_db(transaction=True)
def test_every_websocket_call_re_checks_its_token():
    token, plain = create_token("sec-recheck", TokenScope.AGENT)

    async def scenario():
        communicator = WebsocketCommunicator(application, f"/v1/ws?token={plain}")
        assert (await communicator.connect())[0]
        await communicator.send_json_to({"id": 1, "method": "sandbox.list"})
        first = await communicator.receive_json_from(timeout=10)
        # Gone without telling anyone (no broadcast): the next call must notice by itself.
        await database_sync_to_async(ApiToken.objects.filter(pk=token.pk).delete)()
        await communicator.send_json_to({"id": 2, "method": "sandbox.list"})
        second = await communicator.receive_json_from(timeout=10)
        try:
            closed = await communicator.receive_output(timeout=10)
        except TimeoutError:
            closed = None  # still open
        return first, second, closed

    first, second, closed = asyncio.run(scenario())
    assert "result" in first
    assert second["id"] == 2
    assert second["error"]["code"] == "unauthorized"
    assert closed is not None
    assert (closed["type"], closed["code"]) == ("websocket.close", CLOSE_UNAUTHORIZED)


@pytest.mark.e2e
def test_a_revoked_token_loses_its_terminal_and_its_mcp_call(cocoond, sandbox_image):
    revoked = cocoond.call("tokens.create", {"name": "sec-attach", "scope": "agent"})
    plain = revoked["token"]
    sandbox = cocoond.call("sandbox.create", {"network": "none"}, token=plain)
    try:
        agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"}, token=plain)
        cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 60}, token=plain)
        url = f"{cocoond.ws_url.removesuffix('/v1/ws')}/v1/agents/{agent['id']}/attach?token={plain}"

        def mcp_wait() -> httpx.Response:
            # An MCP call in flight: it would answer `timeout` after 30 s if nothing ended it.
            return httpx.post(
                f"{cocoond.url}/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {
                        "name": "agent_wait",
                        "arguments": {"agentId": agent["id"], "until": ["exited"], "timeoutS": 30},
                    },
                },
                headers={"Authorization": f"Bearer {plain}", "Accept": "application/json, text/event-stream"},
                timeout=60,
            )

        with connect(url, open_timeout=10) as terminal, ThreadPoolExecutor(1) as pool:
            terminal.send(b"echo attached-$((6*7))\r")
            seen = b""
            while b"attached-42" not in seen:
                seen += terminal.recv(timeout=10)
            in_flight = pool.submit(mcp_wait)
            # The MCP call is running once agent.wait listens; give the request a moment to arrive.
            subprocess.run(["sleep", "1"], check=True)
            cocoond.call("tokens.revoke", {"tokenId": revoked["id"]})
            _frames, closed = frames_until_closed(terminal)
            answer = in_flight.result(timeout=60)
        assert closed.rcvd.code == CLOSE_UNAUTHORIZED
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["code"] == "unauthorized"
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def manage(instance, code: str) -> None:
    """Run Python against the instance's database from a process of its own, as an operator would."""
    env = server_env(COCOON_DATA=str(instance.data), COCOON_INSTANCE=instance.instance, **instance.env)
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True)


def browser_ws(instance, username: str, password: str):
    """Log in through the form like a browser, then open the UI's WebSocket with the session cookie."""
    browser = httpx.Client(base_url=instance.url, timeout=30)
    browser.get("/login")
    response = browser.post(
        "/login",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
    )
    assert response.status_code == 302, response.text
    cookie = "; ".join(f"{name}={value}" for name, value in browser.cookies.items())
    headers = {"Cookie": cookie, "Origin": instance.url}
    return browser, connect(instance.ws_url, additional_headers=headers, open_timeout=10)


def call(ws, method: str) -> dict:
    ws.send(json.dumps({"id": 1, "method": method, "params": {}}))
    return json.loads(ws.recv(timeout=10))


@pytest.mark.e2e
def test_logout_and_changes_made_by_another_process_close_the_live_websockets(start_cocoond, redis_url):
    instance = start_cocoond(env={"REDIS_URL": redis_url})
    revoked = instance.call("tokens.create", {"name": "sec-elsewhere", "scope": "agent"})
    manage(
        instance,
        "from django.contrib.auth import get_user_model; "
        "get_user_model().objects.create_superuser('sec-root', password='pw-old')",
    )
    staying, staying_ws = browser_ws(instance, "sec-root", "pw-old")
    leaving, leaving_ws = browser_ws(instance, "sec-root", "pw-old")
    with staying_ws, leaving_ws, instance.ws(token=revoked["token"]) as token_ws:
        assert "result" in call(leaving_ws, "sandbox.list")
        leaving.post("/logout", data={"csrfmiddlewaretoken": leaving.cookies["csrftoken"]})
        _frames, closed = frames_until_closed(leaving_ws)
        assert closed.rcvd.code == CLOSE_UNAUTHORIZED
        assert "result" in call(staying_ws, "sandbox.list")  # another session of the same user stays
        # Another process (over Redis) changes the user's password and revokes the token.
        manage(
            instance,
            "from django.contrib.auth import get_user_model; "
            "from cocoon.actors import SYSTEM_ACTOR; from cocoon.tokens import revoke_token; "
            "user = get_user_model().objects.get(username='sec-root'); "
            "user.set_password('pw-new'); user.save(); "
            f"revoke_token('{revoked['id']}', actor=SYSTEM_ACTOR)",
        )
        for ws in (staying_ws, token_ws.connection):
            _frames, closed = frames_until_closed(ws)
            assert closed.rcvd.code == CLOSE_UNAUTHORIZED
    staying.close()
    leaving.close()


def test_a_token_revoked_by_another_process_is_refused_at_once(start_cocoond, redis_url):
    """cocoond remembers verified tokens (cocoon.tokencache); a revocation anywhere reaches it over Redis."""
    instance = start_cocoond(env={"REDIS_URL": redis_url})
    cached = instance.call("tokens.create", {"name": "sec-cached", "scope": "agent"})
    for _ in range(3):
        assert instance.call("system.info", token=cached["token"])["version"]
    manage(
        instance,
        "from cocoon.actors import SYSTEM_ACTOR; from cocoon.tokens import revoke_token; "
        f"revoke_token('{cached['id']}', actor=SYSTEM_ACTOR)",
    )
    refused = instance.post("system.info", token=cached["token"])
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "token_revoked")
