"""What metering LLM usage costs, each figure next to a baseline measured in the same run:

- the credential proxy's meter (images/egress-proxy/meter.py Meter) over answers of the real APIs'
  shapes: an Anthropic Messages stream of --events text deltas, an OpenAI Responses stream, a JSON
  answer; fed in the proxy's 64 KiB pieces and in 1,448-byte pieces (one TCP segment each), per answer,
  against the same loop that only passes the pieces on (the proxy without a meter). Target: <= +1 ms;
- the SSE time to the first byte, and for the rest of the stream, through the proxy's forwarding loop
  (forward_response) in a process of its own between real loopback TCP sockets, with its meter and
  without (--streams each, interleaved): the ratio. Target: <= 1.05x;
- ingest: --records usage records of 50 agents in 5 sandboxes written where a cocoond of its own reads
  the proxy's file, until usage.summary counts all of them: records per second (the beat collects
  every 2 s: the figure includes up to one tick of waiting).

    .venv/bin/python bench/metering.py [--events 400] [--records 20000] [--streams 300]
"""

import argparse
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import cocoond, sandbox_image  # noqa: E402
from tests.conftest import wait_until  # noqa: E402
from tests.egress_proxy import meter as proxy  # noqa: E402

RUNS = 200


def sse(events: list[tuple[str, dict]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


def answers(events: int) -> dict[str, bytes]:
    usage = {"input_tokens": 1200, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 9000}
    start = {
        "type": "message_start",
        "message": {"model": "claude-sonnet-4-5", "usage": usage | {"output_tokens": 1}},
    }
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "word " * 8}}
    anthropic = sse(
        [("message_start", start)]
        + [("content_block_delta", delta)] * events
        + [("message_delta", {"type": "message_delta", "usage": {"output_tokens": 900}})]
    )
    text = {"type": "response.output_text.delta", "delta": "word " * 8}
    done = {
        "type": "response.completed",
        "response": {"model": "gpt-5-codex", "usage": {"input_tokens": 5000, "output_tokens": 700}},
    }
    openai = sse([("response.output_text.delta", text)] * events + [("response.completed", done)])
    content = [{"type": "text", "text": "w " * 4000}]
    message = {"model": "claude-sonnet-4-5", "content": content, "usage": usage | {"output_tokens": 900}}
    json_answer = json.dumps(message).encode()
    head = "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n"
    return {
        "anthropic sse": head.format("text/event-stream", len(anthropic)).encode() + anthropic,
        "openai responses sse": head.format("text/event-stream", len(openai)).encode() + openai,
        "anthropic json": head.format("application/json", len(json_answer)).encode() + json_answer,
    }


def per_answer(raw: bytes, piece: int, metered: bool) -> float:
    """Seconds (median of RUNS) to pass an answer on in pieces, reading each with a meter or not."""
    pieces = [raw[start : start + piece] for start in range(0, len(raw), piece)]
    sink = bytearray()
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        meter = proxy.Meter() if metered else None
        for data in pieces:
            sink[:] = data  # stands for connection.sendall
            if meter is not None:
                meter.feed(data)
        if meter is not None:
            meter.end()
            assert meter.record()["outputTokens"], "the meter read no usage"
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def meter_rows(events: int) -> None:
    print(f"{'answer':<24} {'bytes':>8} {'piece':>6} {'without':>9} {'with':>9} {'added':>9}  target")
    for name, raw in answers(events).items():
        for piece in (65536, 1448):
            bare, metered = per_answer(raw, piece, False), per_answer(raw, piece, True)
            added = (metered - bare) * 1000
            verdict = "met" if added <= 1 else "NOT met"
            print(
                f"{name:<24} {len(raw):>8} {piece:>6} {bare * 1000:>7.3f}ms {metered * 1000:>7.3f}ms "
                f"{added:>+7.3f}ms  <= +1 ms: {verdict}"
            )


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        near = socket.create_connection(listener.getsockname())
        far, _address = listener.accept()
    return near, far


def through_proxy(raw: bytes, metered: bool) -> tuple[float, float]:
    """Seconds from the upstream's first write (its head with message_start) to the client's first
    byte, and from its next writes (the other events, one a write, in a burst) to the client's last
    byte, through forward_response in a process of its own (as the proxy is: in one process the meter
    would hold the client's interpreter up too)."""
    upstream, upstream_far = tcp_pair()  # the proxy's socket to the provider, and the provider's
    client, client_far = tcp_pair()  # the client's socket, and the proxy's socket to it
    ready, told = os.pipe()
    if (child := os.fork()) == 0:
        upstream_far.close()  # else the upstream's close would never reach it
        client.close()
        meter = proxy.Meter() if metered else None
        os.write(told, b"r")
        proxy.forward_response(upstream, client_far, meter)
        read = meter is None or meter.record()["outputTokens"] > 0
        os._exit(0 if read else 1)
    upstream.close()
    client_far.close()
    os.read(ready, 1)
    head, _blank, body = raw.partition(b"\r\n\r\n")
    first_event, *events = (event + b"\n\n" for event in body.split(b"\n\n") if event)
    opening = head + b"\r\n\r\n" + first_event
    started = time.perf_counter()
    upstream_far.sendall(opening)
    received = len(client.recv(65536))
    first = time.perf_counter() - started
    while received < len(opening):
        received += len(client.recv(65536))
    started = time.perf_counter()
    for event in events:
        upstream_far.sendall(event)
    while received < len(raw):
        received += len(client.recv(65536))
    last = time.perf_counter() - started
    upstream_far.close()
    client.close()
    os.close(ready)
    os.close(told)
    assert os.waitpid(child, 0)[1] == 0, "the meter read no usage"
    return first, last


def ttfb_rows(events: int, streams: int) -> None:
    raw = answers(events)["anthropic sse"]
    timings: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(streams):
        for metered in (False, True):  # interleaved: a slower moment of the machine hits both
            timings[metered].append(through_proxy(raw, metered))
    first = {metered: statistics.median(t[0] for t in runs) for metered, runs in timings.items()}
    last = {metered: statistics.median(t[1] for t in runs) for metered, runs in timings.items()}
    ratio = first[True] / first[False]
    print(
        f"\nSSE through forward_response, {events} events, {streams} streams each (median):\n"
        f"first byte  without {first[False] * 1000:.3f} ms  with {first[True] * 1000:.3f} ms  "
        f"ratio {ratio:.2f}x  <= 1.05x: {'met' if ratio <= 1.05 else 'NOT met'}\n"
        f"the rest    without {last[False] * 1000:.3f} ms  with {last[True] * 1000:.3f} ms  "
        f"ratio {last[True] / last[False]:.2f}x"
    )


def ingest_rate(records: int) -> None:
    sandbox_image()
    with cocoond() as server:
        call: Callable = server.call
        sandboxes = [call("sandbox.create", {"network": "none"}) for _ in range(5)]
        agents = [
            call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
            for sandbox in sandboxes
            for _ in range(10)
        ]
        lines = []
        for index in range(records):
            agent = agents[index % len(agents)]
            record = {"id": os.urandom(16).hex(), "at": time.time(), "sandboxId": agent["sandboxId"]}
            record |= {
                "agentId": agent["id"],
                "provider": "anthropic",
                "method": "POST",
                "path": "/v1/messages",
            }
            record |= {"latencyMs": 900.0, "status": 200, "model": "claude-sonnet-4-5", "stream": True}
            record |= {"complete": True, "inputTokens": 1200, "outputTokens": 900}
            record |= {"cacheWriteTokens": 300, "cacheReadTokens": 9000}
            lines.append(json.dumps(record))
        usage_file = server.data / "egress" / "usage.jsonl"
        started = time.monotonic()
        with usage_file.open("a") as file:  # as the proxy would, in one go
            file.write("\n".join(lines) + "\n")

        def counted() -> bool:
            total = call("usage.summary", {"groupBy": "agent"})["total"]
            return total["requests"] >= records

        wait_until(counted, timeout=600, interval=0.2)
        elapsed = time.monotonic() - started
        rate = records / elapsed
        print(
            f"\ningest: {records} records of {len(agents)} agents in {elapsed:.1f} s = {rate:,.0f} records/s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=400)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--streams", type=int, default=300)
    args = parser.parse_args()
    meter_rows(args.events)
    ttfb_rows(args.events, args.streams)
    ingest_rate(args.records)


if __name__ == "__main__":
    main()
