"""A local stand-in for the Anthropic Messages API (streaming SSE), recording every request.

Real agent CLIs talk to it instead of the internet: it answers every prompt with a short text turn.
"""

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _usage() -> dict[str, int]:
    """What one answer used, as an API's meter would count it (input without the cached tokens)."""
    return {
        "inputTokens": random.randint(1, 5000),
        "outputTokens": random.randint(1, 2000),
        "cacheWriteTokens": random.randint(0, 3000),
        "cacheReadTokens": random.randint(0, 20000),
    }


def _turn(message: dict, block: dict, delta: dict, stop_reason: str, used: dict[str, int]) -> list[bytes]:
    """The SSE events of one assistant turn with a single content block; usage as Anthropic sends it
    (the input and cache counts at the start, the output count growing in message_delta)."""
    return [
        _sse("message_start", {"type": "message_start", "message": message}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": used["outputTokens"]},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]


def stream(request: BaseHTTPRequestHandler, chunks: list[bytes], hold: threading.Event | None = None) -> None:
    """An SSE answer; with hold, its first event is sent and the rest once hold is set."""
    request.send_response(200)
    request.send_header("Content-Type", "text/event-stream")
    request.send_header("Content-Length", str(sum(map(len, chunks))))
    request.end_headers()
    request.wfile.write(chunks[0])
    request.wfile.flush()
    if hold is not None:
        hold.wait(timeout=120)
    request.wfile.write(b"".join(chunks[1:]))


class AnthropicStandIn:
    """Answers text; but when a prompt asks to "run" something and the request offers the Bash tool, the
    first answer is a Bash tool call (so the CLI asks for permission), and the answer after the tool
    result is text again. `tool` and `tool_input` call another of the CLI's tools instead (Write,
    AskUserQuestion...), to reach its other dialogs."""

    def __init__(
        self,
        host: str,
        reply: str = "Hello from the stand-in.",
        command: str = "true",
        delay: float = 0,
        trigger: str = "run",
        tool: str = "Bash",
        tool_input: dict | None = None,
        hold: threading.Event | None = None,
        fail: tuple[int, str] | None = None,
    ) -> None:
        self.requests: list[dict] = []
        self.usage: list[dict[str, int]] = []  # what each message answer reported, in the meter's terms
        # Given (status, error type), every message is refused the way the real API refuses it:
        # (401, "authentication_error"), (429, "rate_limit_error"), (529, "overloaded_error").
        self.fail = fail
        self.tool = tool
        self.tool_input = tool_input or {"command": command, "description": "Run the requested command"}
        self.trigger = trigger  # a prompt holding this asks for the tool call
        self.delay = delay  # seconds before each answer: the CLI shows its working screen meanwhile
        # Given, each streamed answer stops after its message_start (whose usage the proxy records at
        # once) until the event is set: what was used is known before the answer ends.
        self.hold = hold
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                owner._json(self, 200, {"data": [], "has_more": False})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                payload = json.loads(body or b"{}")
                owner.requests.append({"path": self.path, "headers": dict(self.headers), "body": payload})
                if "/count_tokens" in self.path:
                    owner._json(self, 200, {"input_tokens": 10})
                elif self.path.startswith("/v1/messages") and owner.fail:
                    status, kind = owner.fail
                    error = {"type": "error", "error": {"type": kind, "message": f"stand-in: {kind}"}}
                    owner._json(self, status, error)
                elif self.path.startswith("/v1/messages"):
                    time.sleep(owner.delay)
                    owner._message(self, payload, reply)
                else:
                    owner._json(
                        self, 404, {"type": "error", "error": {"type": "not_found_error", "message": "no"}}
                    )

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def _json(request: BaseHTTPRequestHandler, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _wants_tool(self, payload: dict) -> bool:
        tools = {tool.get("name") for tool in payload.get("tools") or []}
        messages = payload.get("messages") or []
        last = messages[-1] if messages else {}
        content = last.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        if any(block.get("type") == "tool_result" for block in blocks):
            return False
        text = " ".join(block.get("text", "") for block in blocks if block.get("type") == "text")
        return self.tool in tools and self.trigger in text.lower()

    def _message(self, request: BaseHTTPRequestHandler, payload: dict, reply: str) -> None:
        used = _usage()
        self.usage.append(used)
        message = {
            "id": "msg_standin",
            "type": "message",
            "role": "assistant",
            "model": payload.get("model", "claude-stand-in"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": used["inputTokens"],
                "cache_creation_input_tokens": used["cacheWriteTokens"],
                "cache_read_input_tokens": used["cacheReadTokens"],
                "output_tokens": 1,
            },
        }
        if not payload.get("stream"):
            message |= {"content": [{"type": "text", "text": reply}], "stop_reason": "end_turn"}
            message["usage"]["output_tokens"] = used["outputTokens"]
            self._json(request, 200, message)
        elif self._wants_tool(payload):
            block = {"type": "tool_use", "id": "toolu_standin", "name": self.tool, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(self.tool_input)}
            self._stream(request, _turn(message, block, delta, "tool_use", used))
        else:
            block, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": reply}
            self._stream(request, _turn(message, block, delta, "end_turn", used))

    def _stream(self, request: BaseHTTPRequestHandler, chunks: list[bytes]) -> None:
        stream(request, chunks, self.hold)


class OpenAIStandIn:
    """A local stand-in for the OpenAI Responses API (streaming SSE), recording every request.

    Answers text; but given a `command`, a prompt asking to "run" something is first answered with a
    call of Codex's `exec` tool (JavaScript that runs the command through its nested `exec_command`,
    asking for escalation, so Codex asks for approval), and the answer after the tool's output is text."""

    def __init__(
        self,
        host: str,
        reply: str = "Hello from the OpenAI stand-in.",
        delay: float = 0,
        command: str | None = None,
        fail: tuple[int, str] | None = None,
    ) -> None:
        self.requests: list[dict] = []
        self.usage: list[dict[str, int]] = []  # what each response reported, in the meter's terms
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                AnthropicStandIn._json(
                    self, 200, {"object": "list", "data": [{"id": "gpt-standin", "object": "model"}]}
                )

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                payload = json.loads(body or b"{}")
                owner.requests.append({"path": self.path, "headers": dict(self.headers), "body": payload})
                time.sleep(delay)
                if fail is not None:  # (401, "invalid_api_key"): refused as the real API refuses
                    status, code = fail
                    error = {"message": f"stand-in: {code}", "type": "invalid_request_error", "code": code}
                    AnthropicStandIn._json(self, status, {"error": error})
                    return
                if command is not None and _asks_to_run(payload):
                    item = {
                        "type": "custom_tool_call",
                        "id": "ctc_standin",
                        "call_id": "call_standin",
                        "name": "exec",
                        "status": "completed",
                        "input": "text(await tools.exec_command("
                        + json.dumps(
                            {
                                "cmd": command,
                                "sandbox_permissions": "require_escalated",
                                "justification": "Do you want to run the requested command?",
                            }
                        )
                        + "));",
                    }
                else:
                    item = {
                        "type": "message",
                        "role": "assistant",
                        "id": "msg_standin",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": reply, "annotations": []}],
                    }
                used = _usage() | {"cacheWriteTokens": 0}  # OpenAI counts no cache writes
                owner.usage.append(used)
                stream(self, _response(payload, item, used))

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _asks_to_run(payload: dict) -> bool:
    """The last input is the user's prompt with "run" in it (not a tool's output), in a turn of the
    conversation (not Codex's side request for a title, which quotes the prompt under an output schema)."""
    items = payload.get("input") or []
    last = items[-1] if items and isinstance(items, list) else {}
    schema = (payload.get("text") or {}).get("format", {}).get("type") == "json_schema"
    if schema or last.get("type") != "message" or last.get("role") != "user":
        return False
    return any("run" in (part.get("text") or "").lower() for part in last.get("content") or [])


def _response(payload: dict, item: dict, used: dict[str, int]) -> list[bytes]:
    """The SSE events of one response with a single output item."""
    response = {
        "id": "resp_standin",
        "object": "response",
        "status": "completed",
        "model": payload.get("model", ""),
    }
    chunks = [
        _sse(
            "response.created", {"type": "response.created", "response": response | {"status": "in_progress"}}
        ),
        _sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
    ]
    if item["type"] == "message":
        delta = {
            "type": "response.output_text.delta",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "delta": item["content"][0]["text"],
        }
        chunks.append(_sse("response.output_text.delta", delta))
    # OpenAI's input count holds the cached tokens, which it names apart.
    inputs = used["inputTokens"] + used["cacheReadTokens"]
    usage = {
        "input_tokens": inputs,
        "input_tokens_details": {"cached_tokens": used["cacheReadTokens"]},
        "output_tokens": used["outputTokens"],
        "total_tokens": inputs + used["outputTokens"],
    }
    return [
        *chunks,
        _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        _sse(
            "response.completed",
            {"type": "response.completed", "response": response | {"output": [item], "usage": usage}},
        ),
    ]
