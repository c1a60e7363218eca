"""The policy cocoond writes (policy.json in COCOON_EGRESS_DIR): reloaded as soon as it changes and
acknowledged in ack.json; and what it says of a name: the one address dialled for it.

The loaded policy is this module's `policy`, replaced whole on a reload: the other modules read it as
rules.policy, when they need it."""

import json
import os
import socket
import ssl
import sys
import time
from typing import Any

from base import DIR, Denied
from hosts import canonical_host, ip_literal, public_address

DIAL_TIMEOUT_S = 10
RELOAD_INTERVAL_S = 0.05


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
