"""Real local stand-ins for what notifications reach outside this machine: an SMTP server (aiosmtpd), an
HTTP receiver for signed webhooks and chat webhooks (ntfy's, which Apprise posts), all on loopback."""

import email
import email.policy
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from tests.conftest import free_port, wait_until


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() on arrival: comparable with times taken in a sandbox (it reads this clock)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def document(self) -> dict[str, Any]:
        """The body as a JSON object, or {} for anything else."""
        try:
            document = json.loads(self.body)
        except ValueError:
            return {}
        return document if isinstance(document, dict) else {}


@dataclass
class HttpReceiver:
    """Takes every POST and answers `status`; keeps what came."""

    status: int = 200
    requests: list[Request] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)  # notified on each request
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait(self, count: int = 1, timeout: float = 20) -> list[Request]:
        wait_until(lambda: len(self.requests) >= count, timeout=timeout)
        return self.requests


@contextmanager
def http_receiver(status: int = 200) -> Iterator[HttpReceiver]:
    receiver = HttpReceiver(status=status)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with receiver.changed:
                receiver.requests.append(Request(self.path, dict(self.headers.items()), body, time.time()))
                receiver.changed.notify_all()
            self.send_response(receiver.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def verify_signature(request: Request, secret: str, tolerance_s: float = 300) -> dict[str, Any]:
    """What a receiver of cocoon's signed webhook does (docs/notifications.md): the body, or raises."""
    parts = dict(part.split("=", 1) for part in request.headers["X-Cocoon-Signature"].split(","))
    expected = hmac.new(secret.encode(), f"{parts['t']}.".encode() + request.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(expected, parts["v1"]), "bad signature"
    assert abs(time.time() - int(parts["t"])) < tolerance_s, "stale signature"
    return json.loads(request.body)


@dataclass
class SmtpServer:
    port: int
    messages: list[email.message.EmailMessage] = field(default_factory=list)

    def url(self, to: str = "ops@example.invalid") -> str:
        """An Apprise URL for mail to this server (plain SMTP on loopback)."""
        return f"mailto://127.0.0.1:{self.port}?to={to}&from=cocoon@example.invalid"

    def wait(self, count: int = 1, timeout: float = 30) -> list[email.message.EmailMessage]:
        wait_until(lambda: len(self.messages) >= count, timeout=timeout)
        return self.messages


def text_of(message: email.message.EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return part.get_content()


@contextmanager
def smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer(port=free_port())

    class Handler:
        async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:  # noqa: N802
            server.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
            return "250 OK"

    controller = Controller(Handler(), hostname="127.0.0.1", port=server.port)
    controller.start()
    try:
        yield server
    finally:
        controller.stop()
