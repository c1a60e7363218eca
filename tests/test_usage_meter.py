"""The credential proxy's meter (images/egress-proxy/meter.py) on the answers of the real APIs' shapes:
Anthropic Messages and OpenAI Chat Completions / Responses, JSON and SSE, framed by length, by chunks or
by the connection's end, fed in any pieces; and answers it must not trust or cannot read."""

import json
import random

import pytest

from tests.egress_proxy import meter as proxy


def sse(*events: tuple[str | None, dict | str]) -> bytes:
    out = b""
    for name, data in events:
        if name:
            out += f"event: {name}\n".encode()
        out += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()
    return out


def answer(body: bytes, content_type: str, framing: str = "length", extra: str = "") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{extra}"
    if framing == "length":
        return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
    if framing == "close":
        return f"{head}\r\n".encode() + body
    pieces, rest = [], body
    while rest:
        size = random.randint(1, 40)
        pieces.append(b"%x\r\n%b\r\n" % (len(rest[:size]), rest[:size]))
        rest = rest[size:]
    return f"{head}Transfer-Encoding: chunked\r\n\r\n".encode() + b"".join(pieces) + b"0\r\n\r\n"


def metered(raw: bytes, piece: int | None = None) -> dict:
    meter = proxy.Meter()
    step = piece or len(raw)
    for start in range(0, len(raw), step):
        meter.feed(raw[start : start + step])
    meter.end()
    return meter.record()


ANTHROPIC_SSE = sse(
    ("message_start", {"type": "message_start", "message": {"model": "claude-sonnet-4-5", "usage": {
        "input_tokens": 25, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 5,
        "output_tokens": 1}}}),
    ("content_block_delta", {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}}),
    ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 42}}),
    ("message_stop", {"type": "message_stop"}),
)  # fmt: skip


def tokens(inputs: int, outputs: int, cache_write: int = 0, cache_read: int = 0) -> dict[str, int]:
    counts = (inputs, outputs, cache_write, cache_read)
    return dict(
        zip(("inputTokens", "outputTokens", "cacheWriteTokens", "cacheReadTokens"), counts, strict=True)
    )


ANTHROPIC_TOKENS = tokens(25, 42, 10, 5)
CASES = {
    "anthropic json": (
        json.dumps({"model": "claude-opus-4-1", "usage": {"input_tokens": 7, "output_tokens": 3,
                    "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2}}).encode(),
        "application/json", "claude-opus-4-1", tokens(7, 3, 0, 2),
    ),
    "anthropic sse": (
        ANTHROPIC_SSE, "text/event-stream; charset=utf-8", "claude-sonnet-4-5", ANTHROPIC_TOKENS,
    ),
    "openai chat json": (
        json.dumps({"object": "chat.completion", "model": "gpt-5", "usage": {"prompt_tokens": 100,
                    "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 60}}}).encode(),
        "application/json", "gpt-5", tokens(40, 20, 0, 60),
    ),
    "openai chat sse": (
        sse((None, {"object": "chat.completion.chunk", "model": "gpt-5-mini", "usage": None, "choices": []}),
            (None, {"object": "chat.completion.chunk", "model": "gpt-5-mini", "choices": [],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 4}}),
            (None, "[DONE]")),
        "text/event-stream", "gpt-5-mini", tokens(9, 4),
    ),
    "openai responses sse": (
        sse(("response.created",
             {"type": "response.created", "response": {"model": "gpt-5-codex", "usage": None}}),
            ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "x"}),
            ("response.completed", {"type": "response.completed", "response": {
                "model": "gpt-5-codex",
                "usage": {"input_tokens": 1200, "output_tokens": 80,
                          "input_tokens_details": {"cached_tokens": 1000}}}})),
        "text/event-stream", "gpt-5-codex", tokens(200, 80, 0, 1000),
    ),
}  # fmt: skip


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
@pytest.mark.parametrize("piece", [None, 1, 7, 4096])
@pytest.mark.parametrize("case", CASES)
def test_the_meter_reads_model_and_tokens_however_the_answer_is_framed_and_cut(case, framing, piece):
    body, content_type, model, tokens = CASES[case]
    record = metered(answer(body, content_type, framing), piece)
    assert (record["status"], record["model"], record["complete"]) == (200, model, True)
    assert {name: record[name] for name in proxy.TOKEN_FIELDS} == tokens
    assert record["stream"] == content_type.startswith("text/event-stream")


def test_an_answer_cut_short_keeps_what_it_counted_so_far():
    raw = answer(ANTHROPIC_SSE, "text/event-stream")
    cut = raw[: raw.index(b"message_delta")]
    record = metered(cut, 5)
    assert (record["complete"], record["inputTokens"], record["outputTokens"]) == (False, 25, 1)


@pytest.mark.parametrize(
    "raw",
    [
        answer(
            b"\x1f\x8b" + b"x" * 50, "application/json", extra="Content-Encoding: gzip\r\n"
        ),  # not asked for
        answer(b'{"usage": {"input_tokens": 5', "application/json"),  # not JSON
        answer(
            b"data: " + b"A" * (proxy.METER_LINE_MAX + 10), "text/event-stream", "close"
        ),  # a line without end
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # a chunk size that is none
        b"SSH-2.0-OpenSSH\r\n\r\n",  # no HTTP at all
    ],
)
def test_what_the_meter_cannot_read_it_leaves_without_counting(raw):
    record = metered(raw, 3)
    assert {name: record[name] for name in proxy.TOKEN_FIELDS} == dict.fromkeys(proxy.TOKEN_FIELDS, 0)


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": -5, "output_tokens": "9"},  # negative, a string
        {"input_tokens": True, "output_tokens": 10**13},  # a boolean, absurd
        [1, 2, 3],
    ],
)
def test_hostile_token_counts_count_as_none(usage):
    record = metered(answer(json.dumps({"model": "m", "usage": usage}).encode(), "application/json"))
    assert record["inputTokens"] == record["outputTokens"] == 0


def test_a_100_continue_before_the_answer_is_skipped():
    body, content_type, model, counts = CASES["anthropic json"]
    record = metered(b"HTTP/1.1 100 Continue\r\n\r\n" + answer(body, content_type), 9)
    assert (record["status"], record["model"]) == (200, model)
    assert {name: record[name] for name in proxy.TOKEN_FIELDS} == counts


def test_an_answer_that_is_no_api_answer_is_passed_on_and_never_held():
    meter = proxy.Meter()
    meter.feed(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 99999999\r\n\r\n"
    )
    for _piece in range(100):
        meter.feed(b"x" * 65536)
    assert not meter.readable
    assert len(meter._pending) + len(meter._body) == 0  # nothing kept of a download


def test_json_nested_too_deep_to_parse_is_not_read():
    deep = b'{"usage": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert metered(answer(deep, "application/json"))["inputTokens"] == 0
    line = b'data: {"usage": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n\n"
    assert metered(answer(line, "text/event-stream"))["inputTokens"] == 0
