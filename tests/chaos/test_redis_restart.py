"""Chaos (issue #14): in Redis mode the Redis server restarts (empty, as after a crash) under a cocoond
with a WebSocket subscribed to events and an agent.wait in flight. RPC answers again as soon as Redis is
back (meanwhile, what needs Redis with a clear error); the subscribed WebSocket keeps working or is
closed cleanly, saying why, never left deaf; a client that connects again hears new events; the
agent.wait answers the agent's state."""

import socket
import threading
import time
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.chaos.faults import settle
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e
BACK_S = 5  # RPC answers again this soon after Redis is back
WAIT_S = 15  # the agent.wait answers this soon after the agent ended (it reads the row every 5 s)


def redis_command(port: int, *words: str) -> bytes:
    """One command to the test's own redis-server, in RESP; returns the raw answer."""
    request = f"*{len(words)}\r\n" + "".join(f"${len(word)}\r\n{word}\r\n" for word in words)
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(request.encode())
        return sock.recv(64)


def clear_error(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 503, response.text
    assert "Traceback" not in response.text
    error = response.json()["error"]
    assert error["code"] == "unavailable", error
    assert "Redis" in error["message"], error
    return error


def what_came(ws: Any) -> tuple[list[dict[str, Any]], int | None]:
    """The frames a WebSocket receives within a bound, and its close code (None while it is open)."""
    frames: list[dict[str, Any]] = []
    try:
        while len(frames) < 2:
            frames.append(ws.receive(timeout=10))
            if "subscription" in frames[-1]:
                break
    except ConnectionClosed as closed:
        return frames, closed.rcvd.code if closed.rcvd else 1006
    except TimeoutError:
        pass
    return frames, None


def test_a_redis_restart_is_answered_clearly_and_recovered_from(start_cocoond, redis_server, sandbox_image):
    cocoond = start_cocoond(env={"REDIS_URL": redis_server.url})
    sandbox = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
    waited: dict[str, Any] = {}

    def wait() -> None:
        params = {"agentId": agent["id"], "until": ["exited"], "timeoutS": 120}
        waited["response"] = cocoond.post("agent.wait", params)

    waiter = threading.Thread(target=wait)
    waiter.start()
    # In flight: it has joined its agent's group in Redis.
    wait_until(
        lambda: redis_command(redis_server.port, "ZCARD", f"cocoon:group:agent.{agent['id']}") == b":1\r\n"
    )

    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["settings.updated"]})
        redis_server.stop()
        # A valid token needs no Redis (only counting wrong ones does, #38): what needs none goes on,
        # and what needs it answers with a clear error.
        assert cocoond.post("settings.get").status_code == 200
        clear_error(cocoond.post("settings.get", token="cct_wrong"))
        redis_server.start()
        back = time.monotonic()

        def answers_again() -> None:
            response = cocoond.post("settings.get")
            assert response.status_code == 200, clear_error(response)  # meanwhile: a clear error

        settle(answers_again, bound_s=BACK_S)
        assert time.monotonic() - back < BACK_S
        cocoond.call("settings.update", {"sandbox": {"image": "cocoon-sandbox:after"}})
        frames, closed = what_came(ws)
        if closed is None:  # it kept working: the event caused after the restart came
            assert frames, "the subscribed WebSocket hangs: neither the event nor a close came"
            assert "subscription" in frames[0], frames
            assert frames[0]["event"]["data"]["sandbox"]["image"] == "cocoon-sandbox:after", frames
        else:  # or it said why in a last frame, then closed with 4503 (unavailable: connect again)
            assert closed == 4503, (closed, frames)
            assert [frame["error"]["code"] for frame in frames] == ["unavailable"], frames
            assert "connect again" in frames[0]["error"]["message"], frames

    # A client that connects again and subscribes again hears new events.
    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["settings.updated"]})
        cocoond.call("settings.update", {"sandbox": {"image": "cocoon-sandbox:again"}})
        assert ws.next_event()["event"]["data"]["sandbox"]["image"] == "cocoon-sandbox:again"

    # The agent.wait lived through it, and answers the state the agent reaches now.
    assert waiter.is_alive(), waited["response"].text
    cocoond.call("agent.kill", {"agentId": agent["id"]})
    waiter.join(timeout=WAIT_S)
    assert not waiter.is_alive(), "agent.wait did not answer"
    response = waited["response"]
    assert response.status_code == 200, response.text
    assert response.json()["result"]["status"] == "exited"
