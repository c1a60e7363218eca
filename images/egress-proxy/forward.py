"""The forward proxy (:3128): CONNECT tunnels and plain-HTTP requests to allow-listed hosts."""

from typing import Any
from urllib.parse import urlsplit

from base import Denied
from handler import Handler
from hosts import canonical_host, ip_literal
from http1 import Request, forward_body, relay, send_head
from meter import forward_response
from rules import Policy, dial, resolve

ALLOWED_PORTS = {80, 443}


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
