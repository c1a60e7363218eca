"""A recording stand-in for 'the internet' behind the egress proxy.

A network namespace of our own with a public-looking address (the proxy refuses private ones),
reached from containers exactly like a host on the internet. It serves HTTP on :80, HTTPS (a test
CA's certificate for *.invalid names) on :443, and plain listeners on :22 and :8443; every request and
connection is recorded, so a regression shows up as a recorded request, never as real egress.

Run as a script inside the namespace: python upstream.py RECORD_FILE CERT KEY ADDRESS.
"""

import datetime
import json
import os
import socketserver
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

# Names the proxy is told (settings egress.hosts) to answer with the stand-in's address.
NAMES = ["allowed.invalid", "api.allowed.invalid", "denied.invalid", "llm.invalid", "evilallowed.invalid"]
STANDIN_KEY = "real-upstream-key-0123456789abcdef"


# /slow-messages: what its stream says at the start, and how long until its end.
SLOW_MODEL = "claude-sonnet-4-5"
SLOW_USAGE = {
    "input_tokens": 321,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 1,
}
HOLD_S = 20


def anthropic_event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name} | data)}\n\n".encode()


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    record_file = ""
    lock = threading.Lock()

    def log_message(self, *args: Any) -> None:
        pass

    def _record(self) -> None:
        entry = {
            "port": self.server.server_address[1],
            "method": self.command,
            "path": self.path,
            "headers": [[name.lower(), value] for name, value in self.headers.items()],
            "at": time.time(),
            "client": self.client_address[0],
        }
        with self.lock, open(self.record_file, "a") as file:
            file.write(json.dumps(entry) + "\n")

    def _send(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _skip(self, size: int) -> int:
        left = size
        while left and (data := self.rfile.read(min(left, 65536))):
            left -= len(data)
        return size - left

    def _drain(self) -> int:
        """Read the request body in pieces (benchmarks send gigabytes); returns its size."""
        if (self.headers.get("Transfer-Encoding") or "").lower() != "chunked":
            return self._skip(int(self.headers.get("Content-Length") or 0))
        size = 0
        while chunk := int(self.rfile.readline().split(b";")[0] or b"0", 16):
            size += self._skip(chunk)
            self.rfile.readline()
        while self.rfile.readline() not in {b"\r\n", b""}:  # trailers
            pass
        return size

    def do_GET(self) -> None:
        self._record()
        received = self._drain()
        if self.path.endswith("/sink"):
            self._send(200, f"received {received}".encode())
            return
        keys = [self.headers.get("x-api-key"), (self.headers.get("authorization") or "")[7:]]
        if self.path.endswith("/models"):
            if STANDIN_KEY not in keys:
                self._send(401, b'{"error": "bad key"}', "application/json")
            else:
                self._send(
                    200, json.dumps({"data": [{"id": "standin-large"}, {"id": "standin-small"}]}).encode()
                )
            return
        if self.path.startswith("/bytes/"):  # a large body for throughput benchmarks
            size = int(self.path.rsplit("/", 1)[1])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b"x" * 65536
            while size > 0:
                self.wfile.write(chunk[:size])
                size -= len(chunk)
            return
        if self.path.endswith(("/slow-messages", "/quick-messages")):  # an Anthropic stream; slow: its end
            # comes HOLD_S after its start
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(
                anthropic_event("message_start", {"message": {"model": SLOW_MODEL, "usage": SLOW_USAGE}})
            )
            self.wfile.flush()
            time.sleep(HOLD_S if self.path.endswith("/slow-messages") else 0)
            self.wfile.write(anthropic_event("message_delta", {"usage": {"output_tokens": 77}}))
            self.wfile.write(anthropic_event("message_stop", {}))
            self.close_connection = True
            return
        if self.path.endswith("/sse"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for number in range(4):
                self.wfile.write(f"data: {number} {time.time()}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.5)
            self.close_connection = True
            return
        self._send(200, f"upstream {self.headers.get('Host')} {self.path}".encode())

    do_POST = do_GET  # noqa: N815 - the http.server API


class Threading(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # benchmarks open hundreds of connections at once


def serve(record_file: str, cert: str, key: str, address: str) -> None:
    Recorder.record_file = record_file
    plain = Threading((address, 80), Recorder)
    secure = Threading((address, 443), Recorder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    others = [Threading((address, port), Recorder) for port in (22, 8443)]
    for server in [secure, *others]:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    plain.serve_forever()


# -- the pytest side ------------------------------------------------------------------------------


@dataclass
class Upstream:
    address: str
    ca_pem: str
    record_file: Path

    def requests(self) -> list[dict[str, Any]]:
        try:
            lines = self.record_file.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines]

    def clear(self) -> None:
        self.record_file.write_text("")


def make_certificates(folder: Path) -> tuple[str, Path, Path]:
    """A test CA and a server certificate for NAMES (and their subdomains); returns the CA's PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cocoon test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(name) for name in NAMES] + [x509.DNSName(f"*.{name}") for name in NAMES]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAMES[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = folder / "server.pem", folder / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca.public_bytes(serialization.Encoding.PEM).decode(), cert_path, key_path


@contextmanager
def public_upstream(folder: Path) -> Iterator[Upstream]:
    """The stand-in in its own namespace at 11.<n>.77.2: global by Python's ipaddress (the proxy
    refuses private addresses), routed only to our veth."""
    from tests.netns import namespace_host  # not at the top: this file also runs as the server script

    ca_pem, cert, key = make_certificates(folder)
    record_file = folder / "requests.jsonl"
    subnet = f"11.{os.getpid() % 250}.77"
    serve = [sys.executable, __file__, str(record_file), str(cert), str(key), f"{subnet}.2"]
    with namespace_host("up", subnet, serve, port=80) as address:
        record_file.write_text("")
        yield Upstream(address, ca_pem, record_file)


if __name__ == "__main__":
    serve(*sys.argv[1:5])
