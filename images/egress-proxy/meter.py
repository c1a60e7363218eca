"""The credential proxy's meter: an LLM API's answer read as it passes (its status, model and token
counts), each request's record appended to usage.jsonl; and the loop that passes an upstream's answer
on to the client, through a meter if there is one."""

import contextlib
import json
import os
import re
import socket
import time
from collections.abc import Callable
from typing import Any

from base import DIR, IDLE_TIMEOUT_S, PIECE
from http1 import CHUNK_SIZE

USAGE_FILE = "usage.jsonl"
METER_JSON_MAX = 2 * 1024 * 1024  # a JSON answer larger than this is forwarded, not read for usage
METER_LINE_MAX = 256 * 1024  # an SSE line not ended yet, likewise
METER_TYPES = (b"application/json", b"text/event-stream")  # what is read at all
DRAIN_S = 120  # a client gone mid-answer: how long the rest is still read for its usage
RESPONSE_HEAD = re.compile(rb"HTTP/1\.[01] ([0-9]{3})[^\r\n]*")
TOKEN_FIELDS = ("inputTokens", "outputTokens", "cacheWriteTokens", "cacheReadTokens")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**12 else 0


def usage_of(usage: Any) -> dict[str, int]:
    """Token counts in one shape from Anthropic's usage (input excludes the cache) or OpenAI's (prompt
    or input tokens include the cached ones, which are counted apart here)."""
    if not isinstance(usage, dict):
        return {}
    details = usage.get("input_tokens_details") or usage.get("prompt_tokens_details") or {}
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    found = {
        "outputTokens": _count(usage.get("output_tokens", usage.get("completion_tokens"))),
        "cacheWriteTokens": _count(usage.get("cache_creation_input_tokens")),
        "cacheReadTokens": _count(usage.get("cache_read_input_tokens")) or cached,
    }
    if "input_tokens" in usage or "prompt_tokens" in usage:
        found["inputTokens"] = max(0, _count(usage.get("input_tokens", usage.get("prompt_tokens"))) - cached)
    return {name: value for name, value in found.items() if value or name == "inputTokens"}


class Meter:
    """Reads an LLM API's answer as it passes, without holding a byte of it: the status, and the model
    and token counts of Anthropic Messages and OpenAI Chat Completions / Responses, in JSON or SSE.
    What it cannot read (another framing, a body too large, a gzip it did not ask for) it stops reading,
    and the answer goes on as it is."""

    def __init__(self) -> None:
        self.status = 0
        self.model = ""
        self.tokens: dict[str, int] = {}
        self.stream = False
        self.readable = True
        self.done = False  # the body ended as its framing said
        self._pending = bytearray()  # head, chunk framing or a partial line not read yet
        self._stage = "head"
        self._left = 0  # bytes left in this chunk or body; -1: until the connection closes
        self._chunked = False
        self._body = bytearray()  # a JSON answer, until it ends

    def feed(self, data: bytes) -> None:
        if not self.readable or self.done:
            return
        self._pending += data
        try:
            self._advance()
        except (ValueError, UnicodeDecodeError, RecursionError):
            self._give_up()
        limit = METER_LINE_MAX if self.stream else METER_JSON_MAX
        if len(self._pending) > METER_LINE_MAX + 64 or len(self._body) > limit:
            self._give_up()

    def _give_up(self) -> None:
        """Not readable: what it held goes, and nothing more is taken."""
        self.readable = False
        self._pending, self._body = bytearray(), bytearray()

    def end(self) -> None:
        """The connection closed: a body framed by its close ends here."""
        if self.readable and self._stage == "body" and self._left == -1:
            try:
                self._body_bytes(bytes(self._pending), last=True)
            except (ValueError, UnicodeDecodeError, RecursionError):
                self._give_up()
            self._pending.clear()
            self.done = True

    def _advance(self) -> None:
        """Through what has come: the head, then the body as its framing says (de-chunked)."""
        while not self.done:
            if self._stage == "head":
                end = self._pending.find(b"\r\n\r\n")
                if end < 0:
                    return
                self._head(bytes(self._pending[:end]))
                del self._pending[: end + 4]
            elif self._stage == "size":
                end = self._pending.find(b"\r\n")
                if end < 0:
                    return
                size = CHUNK_SIZE.fullmatch(bytes(self._pending[:end]))
                if size is None:
                    raise ValueError("chunk size")
                del self._pending[: end + 2]
                self._left, self._stage = int(size.group(1), 16), "data"
                if not self._left:  # the last chunk (trailers are not read)
                    self._body_bytes(b"", last=True)
                    self.done = True
            elif self._stage == "crlf":
                if len(self._pending) < 2:
                    return
                if bytes(self._pending[:2]) != b"\r\n":
                    raise ValueError("chunk end")
                del self._pending[:2]
                self._stage = "size"
            else:  # "data" of a chunk, or the "body" framed by its length or the connection's end
                if not self._pending:
                    return
                take = len(self._pending) if self._left == -1 else min(self._left, len(self._pending))
                piece = bytes(self._pending[:take])
                del self._pending[:take]
                if self._left != -1:
                    self._left -= take
                last = self._stage == "body" and self._left == 0
                self._body_bytes(piece, last=last)
                if self._stage == "data" and not self._left:
                    self._stage = "crlf"
                self.done = last

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        status = RESPONSE_HEAD.fullmatch(lines[0])
        if status is None:
            raise ValueError("status line")
        if status.group(1).startswith(b"1"):  # 100 Continue and the like: the answer's head comes next
            return
        self.status = int(status.group(1))
        fields = {}
        for line in lines[1:]:
            name, _sep, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip().lower()
        if fields.get(b"content-encoding", b"identity") != b"identity":
            raise ValueError("encoded")
        content_type = fields.get(b"content-type", b"")
        if not content_type.startswith(METER_TYPES):  # a download, a page: passed on, never held
            raise ValueError("not an API answer")
        self.stream = content_type.startswith(b"text/event-stream")
        self._chunked = fields.get(b"transfer-encoding") == b"chunked"
        length = fields.get(b"content-length")
        self._stage = "size" if self._chunked else "body"
        self._left = -1 if self._chunked or length is None else int(length)
        if self._left == 0:
            self.done = True

    def _body_bytes(self, piece: bytes, last: bool) -> None:
        if not self.stream:
            self._body += piece
            if last and self._body:
                self._event(json.loads(bytes(self._body)))
            return
        if b"\n" not in piece:  # a line goes on: kept (bounded in feed), not copied again
            self._body += piece
            return
        lines = (bytes(self._body) + piece if self._body else piece).split(b"\n")
        self._body = bytearray(lines.pop())  # a line not ended yet
        for line in lines:
            # Only events that may carry a model or usage are parsed: not the many text deltas.
            if line.startswith(b"data:") and (b'"usage"' in line or b'"model"' in line):
                with contextlib.suppress(ValueError, RecursionError):
                    self._event(json.loads(line[5:]))

    def _event(self, event: Any) -> None:
        """One JSON answer or SSE event: where each API puts its model and usage."""
        if not isinstance(event, dict):
            return
        inner = event.get("message") or event.get("response")  # message_start; response.completed
        for part in (event, inner):
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("model"), str) and part["model"]:
                self.model = part["model"][:200]
            found = usage_of(part.get("usage"))
            # Anthropic's message_delta counts on from message_start: later counts replace earlier ones.
            self.tokens |= {name: value for name, value in found.items() if value or name not in self.tokens}

    def record(self) -> dict[str, Any]:
        return {"status": self.status, "model": self.model, "stream": self.stream, "complete": self.done} | {
            name: self.tokens.get(name, 0) for name in TOKEN_FIELDS
        }


def write_usage(record: dict[str, Any]) -> None:
    """One line appended to usage.jsonl, opened for this write only: cocoond moves the file away to
    read it, and the next write starts a new one."""
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    descriptor = os.open(os.path.join(DIR, USAGE_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


def forward_response(
    upstream: Any,
    connection: socket.socket,
    meter: "Meter | None" = None,
    first_usage: Callable[[], None] | None = None,
) -> None:
    """The upstream's answer back to the client, piece by piece as it arrives (a meter reads each piece
    after it went on; first_usage is called once it has read usage, e.g. at a stream's start). One way
    only: what the client sends now is not read, so it can never reach the upstream."""
    upstream.settimeout(IDLE_TIMEOUT_S)
    client_gone_at = 0.0
    while data := upstream.recv(PIECE):
        if not client_gone_at:
            try:
                connection.sendall(data)
            except OSError:  # the client hung up: the provider still counts what it sends
                if meter is None or not meter.readable:
                    raise
                client_gone_at = time.monotonic()
        elif time.monotonic() - client_gone_at > DRAIN_S or (meter is not None and meter.done):
            break
        if meter is not None:
            meter.feed(data)
            if first_usage is not None and meter.tokens and not meter.done:
                first_usage()
                first_usage = None
    if meter is not None:
        meter.end()
