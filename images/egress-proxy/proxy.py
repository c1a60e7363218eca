"""cocoon's egress proxy: the allowlist forward proxy (:3128) and the credential proxy (:8080).

Standard library only. cocoond writes the policy (policy.json in COCOON_EGRESS_DIR); this process
reloads it as soon as it changes and acknowledges the version in ack.json. Denied attempts are
appended to denied.jsonl, which cocoond collects.

Every decision uses one canonical host form, the sandbox is identified only by the source address,
the validated address is the one dialled (no second resolution), and exactly one request is
forwarded per connection (no pipelining, no redirects followed).
"""

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
from typing import Any
from urllib.parse import urlsplit

DIR = os.environ.get("COCOON_EGRESS_DIR", "/etc/cocoon-egress")
# In its container the proxy listens on every network it is attached to; as a local process, set it.
BIND = os.environ.get("COCOON_EGRESS_BIND", "0.0.0.0")  # noqa: S104
FORWARD_PORT = int(os.environ.get("COCOON_EGRESS_FORWARD_PORT", "3128"))
CREDENTIAL_PORT = int(os.environ.get("COCOON_EGRESS_CREDENTIAL_PORT", "8080"))
ALLOWED_PORTS = {80, 443}
MAX_HEAD = 64 * 1024
IDLE_TIMEOUT_S = 300
DIAL_TIMEOUT_S = 10
RELOAD_INTERVAL_S = 0.05
# Never passed on: hop-by-hop headers and anything that claims to say who the client is.
DROPPED_HEADERS = re.compile(
    r"^(connection|keep-alive|proxy-.*|te|trailer|upgrade|forwarded|x-forwarded-.*|x-upstream-.*|"
    r"x-real-ip|via)$"
)
TOKEN_CHARS = re.compile(r"^[A-Za-z0-9_-]+$")


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
    """Load policy.json if it changed since seen, and acknowledge its version."""
    global policy
    try:
        stat = os.stat(os.path.join(DIR, "policy.json"))
        if (stat.st_ino, stat.st_mtime_ns, stat.st_size) == seen:
            return seen
        with open(os.path.join(DIR, "policy.json")) as file:
            policy = Policy(json.load(file))
        _write_atomically("ack.json", {"version": policy.version, "pid": os.getpid()})
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    except (OSError, ValueError) as error:
        print(f"policy not loaded: {error}", file=sys.stderr, flush=True)
        return seen


def watch_policy(seen: tuple[int, int, int] | None) -> None:
    while True:
        time.sleep(RELOAD_INTERVAL_S)
        seen = load_policy(seen)


_denied_lock = threading.Lock()


def report_denied(source: str, host: str, port: int, reason: str) -> None:
    sandbox = policy.sandboxes.get(source, {}).get("id")
    entry = {"sandboxId": sandbox, "source": source, "host": host, "port": port, "reason": reason}
    line = json.dumps({**entry, "at": time.time()}) + "\n"
    with _denied_lock, open(os.path.join(DIR, "denied.jsonl"), "a") as file:
        file.write(line)


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
            if ip is None or not ip.is_global or ip.is_multicast:
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


def read_until(connection: socket.socket, buffered: bytearray, end: bytes) -> bytes:
    """Bytes up to and without end (taken from buffered, reading more as needed), at most MAX_HEAD."""
    while end not in buffered:
        if len(buffered) > MAX_HEAD:
            raise Denied("bad_request", 400)
        chunk = connection.recv(65536)
        if not chunk:
            raise Denied("bad_request", 400)
        buffered += chunk
    taken, _, rest = bytes(buffered).partition(end)
    buffered[:] = rest
    return taken


def parse_head(head: bytes) -> Request:
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
    except ValueError:
        raise Denied("bad_request", 400) from None
    if not version.startswith("HTTP/1."):
        raise Denied("bad_request", 400)
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or " " in name:
            raise Denied("bad_request", 400)
        headers.append((name, value.strip()))
    return Request(method, target, version, headers)


def read_exact(connection: socket.socket, buffered: bytearray, size: int) -> bytes:
    while len(buffered) < size:
        chunk = connection.recv(65536)
        if not chunk:
            raise Denied("bad_request", 400)
        buffered += chunk
    data = bytes(buffered[:size])
    del buffered[:size]
    return data


def read_line(connection: socket.socket, buffered: bytearray) -> bytes:
    return read_until(connection, buffered, b"\r\n") + b"\r\n"


def forward_body(request: Request, connection: socket.socket, buffered: bytearray, upstream: Any) -> None:
    """Exactly the body of this one request, framed as the client framed it; nothing after it."""
    encodings = ",".join(request.values("transfer-encoding")).lower()
    lengths = request.values("content-length")
    if encodings:
        if lengths or encodings.strip() != "chunked":
            raise Denied("bad_request", 400)
        while True:
            line = read_line(connection, buffered)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise Denied("bad_request", 400) from None
            upstream.sendall(line)
            if size == 0:
                while (trailer := read_line(connection, buffered)) != b"\r\n":
                    upstream.sendall(trailer)
                upstream.sendall(b"\r\n")
                return
            upstream.sendall(read_exact(connection, buffered, size + 2))
    if lengths:
        if len(set(lengths)) != 1 or not lengths[0].isdigit():
            raise Denied("bad_request", 400)
        remaining = int(lengths[0])
        while remaining:
            data = read_exact(connection, buffered, min(remaining, 65536))
            upstream.sendall(data)
            remaining -= len(data)


def send_head(
    upstream: Any, request: Request, path: str, host: str, extra: list[tuple[str, str]], drop: set[str]
) -> None:
    """The request head in origin form; headers named in drop are replaced by extra."""
    lines = [f"{request.method} {path} HTTP/1.1", f"Host: {host}"]
    for name, value in request.headers:
        lowered = name.lower()
        if lowered == "host" or lowered in drop or DROPPED_HEADERS.match(lowered):
            continue
        lines.append(f"{name}: {value}")
    lines += [f"{name}: {value}" for name, value in extra]
    lines.append("Connection: close")
    upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))


def relay(a: Any, b: Any, first: bytes = b"") -> None:
    """Copy bytes both ways until either side closes; nothing is buffered beyond one read."""
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
                try:
                    data = key.fileobj.recv(65536)
                except ssl.SSLWantReadError:
                    continue
                if not data:
                    return
                key.data.sendall(data)
                # TLS sockets may hold decrypted bytes the selector cannot see.
                while isinstance(key.fileobj, ssl.SSLSocket) and key.fileobj.pending():
                    key.data.sendall(key.fileobj.recv(65536))
    except OSError:
        return
    finally:
        selector.close()


def respond(connection: socket.socket, status: int, reason: str) -> None:
    body = json.dumps({"error": {"code": reason}}).encode()
    head = (
        f"HTTP/1.1 {status} {'Forbidden' if status == 403 else 'Error'}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        connection.sendall(head.encode() + body)


# -- the two proxies --------------------------------------------------------------------------------


class Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        connection: socket.socket = self.request
        connection.settimeout(IDLE_TIMEOUT_S)
        source = self.client_address[0]
        ip = ip_literal(source)
        source = str(ip) if ip is not None else source
        self.target = ("", 0)
        try:
            sandbox = policy.sandboxes.get(source)
            buffered = bytearray()
            request = parse_head(read_until(connection, buffered, b"\r\n\r\n"))
            if sandbox is None:
                raise Denied("unknown_source")
            self.connection, self.buffered = connection, buffered
            self.serve(request, sandbox, policy)
        except Denied as denied:
            if denied.status == 403:
                report_denied(source, *self.target, denied.reason)
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
                relay(self.connection, upstream, first=bytes(self.buffered))
                return
            path = urlsplit(request.target)._replace(scheme="", netloc="").geturl() or "/"
            send_head(upstream, request, path, host if port == 80 else f"{host}:{port}", [], set())
            forward_body(request, self.connection, self.buffered, upstream)
            relay(upstream, self.connection)


class CredentialHandler(Handler):
    """:8080 — /p-<providerId>/… with the sandbox's placeholder key swapped for the real one."""

    def serve(self, request: Request, sandbox: dict[str, Any], p: Policy) -> None:
        match = re.match(r"^/p-([a-z0-9][a-z0-9-]{0,31})(/.*)?$", request.target)
        if not match:
            raise Denied("unknown_route", 404)
        provider_id, rest = match.group(1), match.group(2) or "/"
        self.target = (f"p-{provider_id}", CREDENTIAL_PORT)
        if sandbox.get("shared"):
            sandbox = p.tokens.get(_offered_token(request), {})
        provider = p.providers.get(provider_id)
        if provider is None or provider_id not in sandbox.get("grants", ()):
            raise Denied("no_grant")
        self._check_placeholder(request, provider, sandbox)
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
        with upstream:
            authority = host if port == (443 if secure else 80) else f"{host}:{port}"
            drop = {"authorization", "x-api-key", provider.get("header", "").lower()}
            send_head(
                upstream, request, base.path.rstrip("/") + rest, authority, _auth_headers(provider), drop
            )
            forward_body(request, self.connection, self.buffered, upstream)
            relay(upstream, self.connection)

    @staticmethod
    def _check_placeholder(request: Request, provider: dict[str, Any], sandbox: dict[str, Any]) -> None:
        if provider.get("auth") == "none":
            return
        expected = f"cocoon_{sandbox['token']}_{provider['secret']}"
        offered = request.values("x-api-key") + [
            value.removeprefix("Bearer ").strip() for value in request.values("authorization")
        ]
        if provider.get("header"):
            offered += [
                value.removeprefix(provider.get("prefix", "")).strip()
                for value in request.values(provider["header"].lower())
            ]
        if expected not in offered:
            raise Denied("bad_placeholder")


def _offered_token(request: Request) -> str:
    """The sandbox token of the first placeholder (cocoon_<token>_<NAME>) in the request's headers."""
    for _name, value in request.headers:
        if match := re.search(r"cocoon_([0-9a-f]{32})_", value):
            return match.group(1)
    return ""


def _auth_headers(provider: dict[str, Any]) -> list[tuple[str, str]]:
    """The real key in the provider's auth style."""
    key, auth = provider.get("key") or "", provider.get("auth", "bearer")
    if auth == "bearer":
        return [("Authorization", f"Bearer {key}")]
    if auth == "x-api-key":
        return [("x-api-key", key)]
    if auth == "header":
        return [(provider["header"], provider.get("prefix", "") + key)]
    return []


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def exit_with_parent(parent: int) -> None:
    """As cocoond's local process (bwrap), end when cocoond is gone instead of lingering."""
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)


def main() -> None:
    # Listening first, then the policy, then serving: the ack means connections are taken, and none
    # is answered before the policy is loaded (it would be refused as coming from nowhere).
    forward = Server((BIND, FORWARD_PORT), ForwardHandler)
    credential = Server((BIND, CREDENTIAL_PORT), CredentialHandler)
    threading.Thread(target=watch_policy, args=(load_policy(None),), name="policy", daemon=True).start()
    threading.Thread(target=credential.serve_forever, daemon=True).start()
    if parent := int(os.environ.get("COCOON_EGRESS_PARENT", "0")):
        threading.Thread(target=exit_with_parent, args=(parent,), daemon=True).start()
    print(f"cocoon egress proxy on {BIND}:{FORWARD_PORT} and :{CREDENTIAL_PORT}", flush=True)
    forward.serve_forever()


if __name__ == "__main__":
    main()
