"""The credential proxy (:8080): /p-<providerId>/… forwarded to the provider with the sandbox's
placeholder key swapped for the real one and the answer metered, or refused with a message (a spent
budget)."""

import contextlib
import json
import os
import re
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

from base import CREDENTIAL_PORT, Denied
from handler import Handler
from hosts import canonical_host
from http1 import Request, discard_body, forward_body, send_head
from meter import Meter, forward_response, write_usage
from rules import Policy, dial, resolve

AGENT_ID = re.compile(r"ag_[a-z0-9]{1,37}")
# A path segment that is . or .. (also percent-encoded): it would leave the provider's base path.
DOT_SEGMENT = re.compile(r"/(\.|%2e){1,2}(/|\?|#|$)", re.IGNORECASE)


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
                # The real key, as cocoond built it: the sandbox's project's own, else the route's.
                auth = list(sandbox.get("keys", {}).get(provider_id, provider["headers"]).items())
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
