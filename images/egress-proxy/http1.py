"""The HTTP/1.1 plumbing of both proxies: heads parsed strictly (RFC 9112, CRLF only), bodies streamed
in bounded pieces, exactly one request forwarded per connection, CONNECT tunnels, the proxy's own
short answers."""

import contextlib
import json
import re
import selectors
import socket
import time
from typing import Any

from base import IDLE_TIMEOUT_S, PIECE, Denied

MAX_LINE = 4096  # a chunk-size or trailer line
# Never passed on: hop-by-hop headers and anything that claims to say who the client is.
DROPPED_HEADERS = re.compile(
    r"^(connection|keep-alive|proxy-.*|te|trailer|upgrade|forwarded|x-forwarded-.*|x-upstream-.*|"
    r"x-real-ip|via)$"
)
# RFC 9110/9112: token, field value (no CR, LF, NUL or other controls but HTAB), origin or absolute
# form of visible ASCII.
TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
REQUEST_LINE = re.compile(rb"(" + TOKEN + rb") ([\x21-\x7e]+) HTTP/1\.([01])")
FIELD = re.compile(rb"(" + TOKEN + rb"):[ \t]*([\t\x20-\x7e\x80-\xff]*?)[ \t]*")
BARE_CR_OR_LF = re.compile(rb"\r(?=[^\n])|(?<!\r)\n")
CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})(;[\t\x20-\x7e]*)?")


class Request:
    def __init__(self, method: str, target: str, version: str, headers: list[tuple[str, str]]) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name]


class Reader:
    """The client's side of a connection: bytes read but not used yet stay in buffered. Until
    deadline is cleared, every read must finish by it (a head trickled in byte by byte times out)."""

    def __init__(self, connection: socket.socket, deadline: float | None = None) -> None:
        self.connection = connection
        self.buffered = bytearray()
        self.deadline = deadline

    def _fill(self) -> None:
        timeout = IDLE_TIMEOUT_S
        if self.deadline is not None:
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                raise TimeoutError
        self.connection.settimeout(timeout)
        chunk = self.connection.recv(PIECE)
        if not chunk:
            raise Denied("bad_request", 400)
        self.buffered += chunk

    def until(self, end: bytes, limit: int) -> bytes:
        """Bytes up to (without) end, at most limit of them; a bare CR or LF on the way is refused."""
        searched = 0
        while (found := self.buffered.find(end, max(0, searched - len(end)))) < 0:
            if len(self.buffered) > limit or BARE_CR_OR_LF.search(self.buffered, max(0, searched - 1)):
                raise Denied("bad_request", 400)
            searched = len(self.buffered)
            self._fill()
        if found > limit or BARE_CR_OR_LF.search(self.buffered, 0, found + len(end)):
            raise Denied("bad_request", 400)
        taken = bytes(self.buffered[:found])
        del self.buffered[: found + len(end)]
        return taken

    def some(self, most: int) -> bytes:
        if not self.buffered:
            self._fill()
        taken = bytes(self.buffered[:most])
        del self.buffered[:most]
        return taken

    def exact(self, size: int) -> bytes:
        while len(self.buffered) < size:
            self._fill()
        taken = bytes(self.buffered[:size])
        del self.buffered[:size]
        return taken


def parse_head(head: bytes) -> Request:
    """RFC 9112 strictly: CRLF line ends only, a token method, one request target of visible ASCII,
    HTTP/1.0 or 1.1, token field names with the colon right after them, no obs-fold, no controls."""
    lines = head.split(b"\r\n")
    request_line = REQUEST_LINE.fullmatch(lines[0])
    if request_line is None:
        raise Denied("bad_request", 400)
    headers = []
    for line in lines[1:]:
        field = FIELD.fullmatch(line)
        if field is None:
            raise Denied("bad_request", 400)
        headers.append((field.group(1).decode("ascii"), field.group(2).decode("latin-1")))
    method, target, minor = (part.decode("ascii") for part in request_line.groups())
    return Request(method, target, f"HTTP/1.{minor}", headers)


def body_length(request: Request) -> int | None:
    """The Content-Length of the body (0 without one), or None for a chunked body; any framing two
    parsers could read differently is refused."""
    encodings = [encoding.lower() for encoding in request.values("transfer-encoding")]
    lengths = request.values("content-length")
    if encodings:
        if lengths or encodings != ["chunked"] or request.version == "HTTP/1.0":
            raise Denied("bad_request", 400)
        return None
    if len(lengths) > 1 or (lengths and not re.fullmatch(r"[0-9]{1,18}", lengths[0])):
        raise Denied("bad_request", 400)
    return int(lengths[0]) if lengths else 0


def forward_body(length: int | None, reader: Reader, upstream: Any) -> None:
    """Exactly the body of this one request (length from body_length), streamed in pieces; a chunked
    body is re-encoded (chunk extensions and trailers stay behind). Nothing after it."""
    if length is not None:
        while length:
            data = reader.some(min(length, PIECE))
            upstream.sendall(data)
            length -= len(data)
        return
    while True:
        size = CHUNK_SIZE.fullmatch(reader.until(b"\r\n", MAX_LINE))
        if size is None:
            raise Denied("bad_request", 400)
        remaining = int(size.group(1), 16)
        if remaining == 0:
            break
        while remaining:
            data = reader.some(min(remaining, PIECE))
            upstream.sendall(b"%x\r\n%b\r\n" % (len(data), data))
            remaining -= len(data)
        if reader.exact(2) != b"\r\n":
            raise Denied("bad_request", 400)
    while line := reader.until(b"\r\n", MAX_LINE):  # trailers: checked, not passed on
        if FIELD.fullmatch(line) is None:
            raise Denied("bad_request", 400)
    upstream.sendall(b"0\r\n\r\n")


def send_head(
    upstream: Any,
    request: Request,
    path: str,
    host: str,
    extra: list[tuple[str, str]],
    drop: set[str],
    chunked: bool,
) -> None:
    """The request head in origin form; headers named in drop are replaced by extra. A chunked body is
    framed again by the proxy, and the upstream closes after its one answer."""
    framing = [("Transfer-Encoding", "chunked")] if chunked else []
    lines = [f"{request.method} {path} HTTP/1.1", f"Host: {host}"]
    for name, value in request.headers:
        lowered = name.lower()
        if lowered in {"host", "transfer-encoding"} or lowered in drop or DROPPED_HEADERS.match(lowered):
            continue
        lines.append(f"{name}: {value}")
    lines += [f"{name}: {value}" for name, value in extra + framing]
    lines.append("Connection: close")
    upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))


def relay(a: Any, b: Any, first: bytes = b"") -> None:
    """Copy bytes both ways until either side closes (a CONNECT tunnel); nothing is buffered beyond
    one read."""
    if first:
        b.sendall(first)
    selector = selectors.DefaultSelector()
    selector.register(a, selectors.EVENT_READ, b)
    selector.register(b, selectors.EVENT_READ, a)
    try:
        while True:
            ready = selector.select(IDLE_TIMEOUT_S)
            if not ready:
                return
            for key, _ in ready:
                data = key.fileobj.recv(PIECE)
                if not data:
                    return
                key.data.sendall(data)
    except OSError:
        return
    finally:
        selector.close()


STATUS_TEXT = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests"}


def answer(status: int, reason: str) -> bytes:
    body = json.dumps({"error": {"code": reason}}).encode()
    head = (
        f"HTTP/1.1 {status} {STATUS_TEXT.get(status, 'Error')}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def discard_body(length: int | None, reader: Reader, limit: int = 64 * 1024 * 1024) -> None:
    """Read the request's body and drop it (at most limit bytes of it)."""

    class Sink:
        taken = 0

        def sendall(self, data: bytes) -> None:
            self.taken += len(data)
            if self.taken > limit:
                raise Denied("too_large", 413)

    forward_body(length, reader, Sink())


def respond(connection: socket.socket, status: int, reason: str) -> None:
    with contextlib.suppress(OSError):
        connection.sendall(answer(status, reason))
