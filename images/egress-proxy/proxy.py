"""cocoon's egress proxy: the allowlist forward proxy (:3128) and the credential proxy (:8080).

Standard library only. cocoond writes the policy (policy.json in COCOON_EGRESS_DIR); this process
reloads it as soon as it changes and acknowledges the version in ack.json. Denied attempts are
appended to denied.jsonl, which cocoond collects.

Every decision uses one canonical host form, the sandbox is identified only by the source address,
the validated address is the one dialled (no second resolution), and exactly one request is
forwarded per connection (no pipelining, no redirects followed): heads are parsed strictly (RFC 9112,
CRLF only), bodies are streamed in bounded pieces, and nothing the client sends after its one request
goes anywhere. One source cannot starve the others: connections are capped per source and in total
(429 beyond), a request head must arrive within seconds, and denied attempts are folded in memory and
written at most once a second, with a bound on distinct hosts per source.
"""

import collections
import contextlib
import ipaddress
import json
import os
import re
import selectors
import socket
import socketserver
import ssl
import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

DIR = os.environ.get("COCOON_EGRESS_DIR", "/etc/cocoon-egress")
# In its container the proxy listens on every network it is attached to; as a local process, set it.
BIND = os.environ.get("COCOON_EGRESS_BIND", "0.0.0.0")  # noqa: S104
FORWARD_PORT = int(os.environ.get("COCOON_EGRESS_FORWARD_PORT", "3128"))
CREDENTIAL_PORT = int(os.environ.get("COCOON_EGRESS_CREDENTIAL_PORT", "8080"))
ALLOWED_PORTS = {80, 443}
MAX_HEAD = 64 * 1024
MAX_LINE = 4096  # a chunk-size or trailer line
PIECE = 65536  # bodies and responses move in pieces of at most this size
HEAD_TIMEOUT_S = 10  # for the whole request head, however slowly it trickles in
IDLE_TIMEOUT_S = 300
DIAL_TIMEOUT_S = 10
# A sandbox's held connections (idle or tunnels) must not use up what the others need; the total stays
# below the container's pids limit (a thread per connection).
MAX_PER_SOURCE = 512
MAX_TOTAL = 3000
THREAD_STACK = 256 * 1024
DENIED_FLUSH_S = 1.0
MAX_DENIED_HOSTS = 20  # distinct hosts per source and flush; the rest are counted under OTHER_HOSTS
OTHER_HOSTS = "*"
RELOAD_INTERVAL_S = 0.05
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
# A path segment that is . or .. (also percent-encoded): it would leave the provider's base path.
AGENT_ID = re.compile(r"ag_[a-z0-9]{1,37}")
DOT_SEGMENT = re.compile(r"/(\.|%2e){1,2}(/|\?|#|$)", re.IGNORECASE)


class Denied(Exception):
    def __init__(self, reason: str, status: int = 403) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


# -- policy -----------------------------------------------------------------------------------------


class Policy:
    def __init__(self, document: dict[str, Any]) -> None:
        self.version: int = document.get("version", 0)
        self.allow = {canonical_host(host) for host in document.get("allowlist", []) if "*" not in host}
        self.suffixes = {
            canonical_host(host[2:]) for host in document.get("allowlist", []) if host[:2] == "*."
        }
        self.hosts = {canonical_host(name): ip for name, ip in document.get("hosts", {}).items()}
        self.sandboxes: dict[str, dict[str, Any]] = document.get("sandboxes", {})
        # Where sandboxes share one source address (bwrap on the host's network), a placeholder's
        # token says which sandbox is asking: {token: sandbox}.
        self.tokens: dict[str, dict[str, Any]] = document.get("tokens", {})
        self.providers: dict[str, dict[str, Any]] = document.get("providers", {})
        # Requests to answer with a message instead of forwarding them (spent budgets).
        self.refuse: dict[str, Any] = document.get("refuse") or {}
        self.tls = ssl.create_default_context()
        if document.get("caBundle"):
            self.tls.load_verify_locations(cadata=document["caBundle"])

    def allows(self, host: str, sandbox: dict[str, Any]) -> bool:
        if host in self.allow or host in sandbox.get("allow", ()):
            return True
        return any(host.endswith("." + suffix) for suffix in self.suffixes)


policy = Policy({})


def _write_atomically(name: str, data: dict[str, Any]) -> None:
    temporary = os.path.join(DIR, f".{name}.tmp")
    with open(temporary, "w") as file:
        json.dump(data, file)
    os.replace(temporary, os.path.join(DIR, name))


def load_policy(seen: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
    """Load policy.json if it changed since seen, and acknowledge its version. A document it cannot
    use is refused in the ack, and the last good policy keeps serving: one bad entry must never take
    egress down for every sandbox."""
    global policy
    try:
        stat = os.stat(os.path.join(DIR, "policy.json"))
        key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if key == seen:
            return seen
        with open(os.path.join(DIR, "policy.json"), "rb") as file:
            content = file.read()
    except OSError as error:  # not there yet: look again
        print(f"policy not loaded: {error}", file=sys.stderr, flush=True)
        return seen
    ack: dict[str, Any] = {"version": policy.version, "pid": os.getpid()}
    document = None
    try:
        # A file that is not JSON, or not an object, is refused like one with a bad entry (and once,
        # not on every look: cocoond replaces the file atomically, so what is read is what was written).
        document = json.loads(content)
        if not isinstance(document, dict):
            raise ValueError("the policy is not a JSON object")
        policy = Policy(document)
        ack["version"] = policy.version
    except Exception as error:
        version = document.get("version") if isinstance(document, dict) else None
        reason = f"{type(error).__name__}: {error}"[:500]
        print(f"policy {version} refused, keeping {policy.version}: {reason}", file=sys.stderr, flush=True)
        ack["refused"] = {"version": version if isinstance(version, int) else 0, "error": reason}
    _write_atomically("ack.json", ack)
    return key


def watch_policy(seen: tuple[int, int, int] | None) -> None:
    while True:
        time.sleep(RELOAD_INTERVAL_S)
        try:
            seen = load_policy(seen)
        except Exception as error:  # e.g. no room for ack.json: try again, never stop watching
            print(f"policy watch: {error}", file=sys.stderr, flush=True)


class DeniedLog:
    """Denied attempts folded per source, host, port and reason (a count, first and last seen) and
    appended to denied.jsonl at most once per DENIED_FLUSH_S: a flood of random names costs a bounded
    number of lines, rows and events, yet every attempt is counted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: dict[tuple[str, str, int, str], dict[str, Any]] = {}
        self.hosts: collections.Counter[str] = collections.Counter()

    def add(self, source: str, host: str, port: int, reason: str) -> None:
        now = time.time()
        with self.lock:
            key = (source, host, port, reason)
            if key not in self.pending:
                if self.hosts[source] >= MAX_DENIED_HOSTS:
                    key = (source, OTHER_HOSTS, 0, reason)
                else:
                    self.hosts[source] += 1
            entry = self.pending.setdefault(key, {"count": 0, "first": now})
            entry["count"] += 1
            entry["at"] = now

    def flush(self) -> None:
        with self.lock:
            pending, self.pending, self.hosts = self.pending, {}, collections.Counter()
        if not pending:
            return
        lines = []
        for (source, host, port, reason), entry in pending.items():
            sandbox = policy.sandboxes.get(source, {}).get("id")
            lines.append(
                json.dumps(
                    {"sandboxId": sandbox, "source": source, "host": host, "port": port}
                    | {"reason": reason, **entry}
                )
            )
        with open(os.path.join(DIR, "denied.jsonl"), "a") as file:
            file.write("\n".join(lines) + "\n")

    def write_forever(self) -> None:
        while True:
            time.sleep(DENIED_FLUSH_S)
            try:
                self.flush()
            except OSError as error:
                print(f"denied attempts not written: {error}", file=sys.stderr, flush=True)


denied_log = DeniedLog()


# -- hosts ------------------------------------------------------------------------------------------


def canonical_host(host: str) -> str:
    """Lower-case, no trailing dot, IDNA; IP literals in every spelling (127.1, 0x7f.0.0.1, 2130706433,
    [::ffff:127.0.0.1]) become their normal form."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host.rstrip(".")
    ip = ip_literal(host)
    if ip is not None:
        return str(ip)
    try:
        encoded = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise Denied("invalid_host", 400) from None
    if not re.fullmatch(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?", encoded) or ".." in encoded:
        raise Denied("invalid_host", 400)
    return encoded


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:  # the forms inet_aton accepts: 127.1, 0x7f.1, 017700000001, 2130706433
            ip = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        return ip.ipv4_mapped
    return ip


# IPv6 addresses that stand for an IPv4 one: judged by that address. (A DNS64 resolver answers
# 64:ff9b::<public IPv4> for ordinary public hosts, so the well-known NAT64 prefix is not refused whole.)
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# Refused whole: local-use NAT64 (RFC 8215), Teredo (the relay decides where it goes), the deprecated
# IPv4-compatible ::a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d and site-local fec0::/10.
REFUSED_V6 = [
    ipaddress.IPv6Network(network)
    for network in ("64:ff9b:1::/48", "2001::/32", "::/96", "::ffff:0:0:0/96", "fec0::/10")
]


def public_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ip may be dialled for a sandbox: a global unicast address, also inside IPv6."""
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in REFUSED_V6):
            return False
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return public_address(embedded)
    return ip.is_global and not ip.is_multicast


def resolve(host: str, port: int, *, public_only: bool) -> str:
    """The one address to dial. With public_only, every answer must be a global address (a name
    whose resolver answers with a private address is refused, whatever else it answers)."""
    if host in policy.hosts:
        addresses = [policy.hosts[host]]
    else:
        try:
            addresses = [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
        except OSError:
            raise Denied("unresolvable", 502) from None
    if not addresses:
        raise Denied("unresolvable", 502)
    if public_only:
        for address in addresses:
            ip = ip_literal(address.split("%")[0])
            if ip is None or not public_address(ip):
                raise Denied("private_address")
    return addresses[0]


def dial(address: str, port: int) -> socket.socket:
    try:
        return socket.create_connection((address, port), timeout=DIAL_TIMEOUT_S)
    except OSError:
        raise Denied("unreachable", 502) from None


# -- HTTP plumbing ----------------------------------------------------------------------------------


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


def refusal(kind: str, message: str) -> bytes:
    """A refused request's answer in the shape its API's clients show: the message names the budget."""
    if kind == "anthropic":
        error: dict[str, Any] = {"type": "error", "error": {"type": "permission_error", "message": message}}
    elif kind == "openai":
        error = {
            "error": {
                "message": message,
                "type": "insufficient_quota",
                "param": None,
                "code": "budget_exceeded",
            }
        }
    else:
        error = {"error": {"code": "budget_exceeded", "message": message}}
    body = json.dumps(error).encode()
    head = (
        f"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def respond(connection: socket.socket, status: int, reason: str) -> None:
    with contextlib.suppress(OSError):
        connection.sendall(answer(status, reason))


# -- metering ---------------------------------------------------------------------------------------

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


# -- the two proxies --------------------------------------------------------------------------------


class Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        connection: socket.socket = self.request
        source = self.client_address[0]
        ip = ip_literal(source)
        source = str(ip) if ip is not None else source
        self.target = ("", 0)
        try:
            sandbox = policy.sandboxes.get(source)
            reader = Reader(connection, deadline=time.monotonic() + HEAD_TIMEOUT_S)
            request = parse_head(reader.until(b"\r\n\r\n", MAX_HEAD))
            reader.deadline = None
            connection.settimeout(IDLE_TIMEOUT_S)
            if sandbox is None:
                raise Denied("unknown_source")
            self.connection, self.reader, self.length = connection, reader, body_length(request)
            self.serve(request, sandbox, policy)
        except Denied as denied:
            if denied.status == 403:
                denied_log.add(source, *self.target, denied.reason)
            respond(connection, denied.status, denied.reason)
        except OSError:
            pass

    def serve(self, request: Request, sandbox: dict[str, Any], p: Policy) -> None:
        raise NotImplementedError


def _split_authority(authority: str, default_port: int) -> tuple[str, int]:
    if "@" in authority:
        raise Denied("userinfo", 400)
    parsed = urlsplit("//" + authority)
    try:
        port = parsed.port or default_port
    except ValueError:
        raise Denied("bad_request", 400) from None
    if not parsed.hostname:
        raise Denied("bad_request", 400)
    raw = authority.rsplit(":", 1)[0] if not authority.endswith("]") and ":" in authority else authority
    return raw, port


class ForwardHandler(Handler):
    """:3128 — CONNECT tunnels and plain-HTTP requests to allow-listed domains on ports 80/443."""

    def serve(self, request: Request, sandbox: dict[str, Any], p: Policy) -> None:
        if request.method == "CONNECT":
            raw, port = _split_authority(request.target, 443)
        else:
            parts = urlsplit(request.target)
            if parts.scheme != "http" or not parts.netloc:
                raise Denied("bad_request", 400)
            raw, port = _split_authority(parts.netloc, 80)
        host = canonical_host(raw)
        self.target = (host, port)
        if ip_literal(host) is not None:
            raise Denied("ip_literal")
        if port not in ALLOWED_PORTS:
            raise Denied("port")
        hosts = request.values("host")
        if len(hosts) > 1 or (request.method != "CONNECT" and not hosts):
            raise Denied("host_header", 400)
        for value in hosts:  # a CONNECT needs none, but one it has must name the same place
            header_host, header_port = _split_authority(value, port)
            if canonical_host(header_host) != host or header_port != port:
                raise Denied("host_mismatch")
        if not p.allows(host, sandbox):
            raise Denied("not_allowed")
        upstream = dial(resolve(host, port, public_only=True), port)
        with upstream:
            if request.method == "CONNECT":
                self.connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                # A tunnel's bytes are the client's own TLS with the host checked above.
                relay(self.connection, upstream, first=bytes(self.reader.buffered))
                return
            path = urlsplit(request.target)._replace(scheme="", netloc="").geturl() or "/"
            authority = host if port == 80 else f"{host}:{port}"
            send_head(upstream, request, path, authority, [], set(), chunked=self.length is None)
            forward_body(self.length, self.reader, upstream)
            forward_response(upstream, self.connection)


class CredentialHandler(Handler):
    """:8080 — /p-<providerId>/… with the sandbox's placeholder key swapped for the real one."""

    def serve(self, request: Request, sandbox: dict[str, Any], p: Policy) -> None:
        match = re.fullmatch(r"/p-([a-z0-9][a-z0-9-]{0,31})(/.*)?", request.target)
        if not match:
            raise Denied("unknown_route", 404)
        if DOT_SEGMENT.search(request.target):
            raise Denied("bad_request", 400)
        provider_id, rest = match.group(1), match.group(2) or "/"
        self.target = (f"p-{provider_id}", CREDENTIAL_PORT)
        if sandbox.get("shared"):
            sandbox = p.tokens.get(_offered_token(request), {})
        provider = p.providers.get(provider_id)
        if provider is None or provider_id not in sandbox.get("grants", ()):
            raise Denied("no_grant")
        agent = self._check_placeholder(request, provider, sandbox)
        sandbox_id = sandbox.get("id") or ""
        at, started, record_id = time.time(), time.monotonic(), os.urandom(16).hex()
        asked = {
            "id": record_id,
            "at": at,
            "sandboxId": sandbox_id,
            "agentId": agent,
            "provider": provider_id,
        }
        asked |= {"method": request.method[:16], "path": rest.split("?")[0][:300]}
        refused = p.refuse.get("all") or p.refuse.get("sandboxes", {}).get(sandbox_id)
        refused = refused or p.refuse.get("agents", {}).get(agent or "")
        if agent is None:  # a request that names no agent counts for none: not where one is spent
            refused = refused or p.refuse.get("unnamed", {}).get(sandbox_id)
        if refused:
            with contextlib.suppress(OSError, Denied):
                discard_body(self.length, self.reader)  # read, or the close would reset the answer
                self.connection.sendall(refusal(provider.get("kind", ""), str(refused)[:500]))
            with contextlib.suppress(OSError):  # a task whose request was refused is failed for it
                write_usage(asked | {"status": 403, "refused": True, "final": True, "latencyMs": 0})
            return
        base = urlsplit(provider["baseUrl"])
        secure = base.scheme == "https"
        port = base.port or (443 if secure else 80)
        host = canonical_host(base.hostname or "")
        self.target = (host, port)
        upstream = dial(resolve(host, port, public_only=False), port)
        if secure:
            try:
                upstream = p.tls.wrap_socket(upstream, server_hostname=host)
            except (ssl.SSLError, OSError):
                upstream.close()
                raise Denied("tls_failed", 502) from None
        meter = Meter()

        def note(final: bool = False) -> None:
            """The request's record as far as it goes: at a stream's start (so that a proxy killed
            mid-stream loses nothing counted) and at its end, under the same id."""
            with contextlib.suppress(OSError):
                write_usage(
                    asked
                    | {"latencyMs": round((time.monotonic() - started) * 1000, 1), "final": final}
                    | meter.record()
                )

        try:
            with upstream:
                authority = host if port == (443 if secure else 80) else f"{host}:{port}"
                # An answer in plain bytes, so that the meter can read its usage as it passes.
                drop = {"authorization", "x-api-key", "accept-encoding", provider.get("header", "").lower()}
                path = base.path.rstrip("/") + rest
                auth = list(provider["headers"].items())  # the real key, as cocoond built it
                auth.append(("Accept-Encoding", "identity"))
                send_head(upstream, request, path, authority, auth, drop, self.length is None)
                forward_body(self.length, self.reader, upstream)
                forward_response(upstream, self.connection, meter, first_usage=note)
        finally:  # also for an answer cut short: what was used until then
            note(final=True)

    @staticmethod
    def _check_placeholder(request: Request, provider: dict[str, Any], sandbox: dict[str, Any]) -> str | None:
        """Refuses a request without the sandbox's placeholder; the agent it names, if it names one
        (cocoon_<token>_<SECRET>.<agentId>: each agent's own, for its usage)."""
        if provider.get("auth") == "none":
            return None
        expected = f"cocoon_{sandbox['token']}_{provider['secret']}"
        offered = request.values("x-api-key") + [
            value.removeprefix("Bearer ").strip() for value in request.values("authorization")
        ]
        if provider.get("header"):
            offered += [
                value.removeprefix(provider.get("prefix", "")).strip()
                for value in request.values(provider["header"].lower())
            ]
        for value in offered:
            if value == expected:
                return None
            if value.startswith(expected + ".") and AGENT_ID.fullmatch(value[len(expected) + 1 :]):
                return value[len(expected) + 1 :]
        raise Denied("bad_placeholder")


def _offered_token(request: Request) -> str:
    """The sandbox token of the first placeholder (cocoon_<token>_<NAME>) in the request's headers."""
    for _name, value in request.headers:
        if match := re.search(r"cocoon_([0-9a-f]{32})_", value):
            return match.group(1)
    return ""


class Slots:
    """Open connections per source, shared by both servers: one sandbox's held sockets cannot take
    the places every other sandbox needs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: collections.Counter[str] = collections.Counter()

    def take(self, source: str) -> bool:
        with self.lock:
            if self.open[source] >= MAX_PER_SOURCE or self.open.total() >= MAX_TOTAL:
                return False
            self.open[source] += 1
            return True

    def give_back(self, source: str) -> None:
        with self.lock:
            self.open[source] -= 1
            if not self.open[source]:
                del self.open[source]


slots = Slots()
TOO_MANY = answer(429, "too_many_connections")


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def process_request(self, request: Any, client_address: Any) -> None:
        source = client_address[0]
        if not slots.take(source):
            # Answered from the accepting thread without waiting: the socket's buffer is empty.
            request.setblocking(False)
            with contextlib.suppress(OSError):
                request.send(TOO_MANY)
            denied_log.add(source, "", 0, "too_many_connections")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            slots.give_back(source)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            slots.give_back(client_address[0])


def exit_with_parent(parent: int) -> None:
    """As cocoond's local process (bwrap), end when cocoond is gone instead of lingering."""
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)


def main() -> None:
    # Listening first, then the policy, then serving: the ack means connections are taken, and none
    # is answered before the policy is loaded (it would be refused as coming from nowhere).
    threading.stack_size(THREAD_STACK)
    forward = Server((BIND, FORWARD_PORT), ForwardHandler)
    credential = Server((BIND, CREDENTIAL_PORT), CredentialHandler)
    threading.Thread(target=watch_policy, args=(load_policy(None),), name="policy", daemon=True).start()
    threading.Thread(target=credential.serve_forever, daemon=True).start()
    threading.Thread(target=denied_log.write_forever, name="denied", daemon=True).start()
    if parent := int(os.environ.get("COCOON_EGRESS_PARENT", "0")):
        threading.Thread(target=exit_with_parent, args=(parent,), daemon=True).start()
    print(f"cocoon egress proxy on {BIND}:{FORWARD_PORT} and :{CREDENTIAL_PORT}", flush=True)
    forward.serve_forever()


if __name__ == "__main__":
    main()
