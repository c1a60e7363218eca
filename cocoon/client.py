"""A small client for cocoon's API: HTTP RPC (sync and async) and WebSocket events.

    client = Client("http://127.0.0.1:7420", token)
    sandbox = client.sandbox_create(network="none")        # typed stubs from cocoon.client_methods
    client.call("sandbox.exec", {"sandboxId": sandbox["id"], "command": ["ls"]})

It imports nothing of Django, so scripts can use it anywhere.
"""

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from cocoon.client_methods import AsyncMethods, Methods


class CocoonError(Exception):
    """An error answered by cocoon: its stable code, translated message and details."""

    def __init__(
        self, code: str, message: str, details: dict[str, Any] | None = None, status: int = 0
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.details, self.status = code, message, details or {}, status


def _result(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        raise CocoonError("invalid_response", response.text[:200], status=response.status_code) from None
    if "error" in body:
        error = body["error"]
        raise CocoonError(error["code"], error["message"], error.get("details"), response.status_code)
    return body["result"]


def _headers(token: str | None, language: str | None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if language:
        headers["x-cocoon-lang"] = language
    return headers


class Client(Methods):
    def __init__(
        self, url: str, token: str | None, language: str | None = None, timeout: float = 300
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.http = httpx.Client(base_url=self.url, headers=_headers(token, language), timeout=timeout)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return _result(self.http.post(f"/v1/rpc/{method}", content=json.dumps(params or {}).encode()))

    def events(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Subscribe and yield events until the caller stops iterating."""
        from websockets.sync.client import connect

        ws_url = self.url.replace("http", "ws", 1) + "/v1/ws"
        with connect(ws_url, additional_headers=dict(self.http.headers)) as ws:
            ws.send(json.dumps({"id": 1, "method": "events.subscribe", "params": filters}))
            answer = json.loads(ws.recv())
            if "error" in answer:
                error = answer["error"]
                raise CocoonError(error["code"], error["message"], error.get("details"))
            for frame in ws:
                yield json.loads(frame)["event"]

    def archive(self, sandbox_id: str, path: str) -> Iterator[bytes]:
        with self.http.stream(
            "GET", f"/v1/sandboxes/{sandbox_id}/archive", params={"path": path}
        ) as response:
            if response.status_code != 200:
                response.read()
                _result(response)
            yield from response.iter_bytes()

    def close(self) -> None:
        self.http.close()


class AsyncClient(AsyncMethods):
    def __init__(
        self, url: str, token: str | None, language: str | None = None, timeout: float = 300
    ) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.AsyncClient(base_url=self.url, headers=_headers(token, language), timeout=timeout)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return _result(await self.http.post(f"/v1/rpc/{method}", content=json.dumps(params or {}).encode()))

    async def events(self, **filters: Any) -> AsyncIterator[dict[str, Any]]:
        from websockets.asyncio.client import connect

        ws_url = self.url.replace("http", "ws", 1) + "/v1/ws"
        async with connect(ws_url, additional_headers=dict(self.http.headers)) as ws:
            await ws.send(json.dumps({"id": 1, "method": "events.subscribe", "params": filters}))
            answer = json.loads(await ws.recv())
            if "error" in answer:
                error = answer["error"]
                raise CocoonError(error["code"], error["message"], error.get("details"))
            async for frame in ws:
                yield json.loads(frame)["event"]

    async def aclose(self) -> None:
        await self.http.aclose()
