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

Its modules, each importing only those before it: base (environment, Denied), hosts, rules (the
policy), http1, denied, meter, handler, forward and credential (the two proxies), and this one, which
listens and starts them.
"""

import collections
import contextlib
import os
import socketserver
import threading
import time
from typing import Any

from base import BIND, CREDENTIAL_PORT, FORWARD_PORT
from credential import CredentialHandler
from denied import denied_log
from forward import ForwardHandler
from http1 import answer
from rules import load_policy, watch_policy

# A sandbox's held connections (idle or tunnels) must not use up what the others need; the total stays
# below the container's pids limit (a thread per connection).
MAX_PER_SOURCE = 512
MAX_TOTAL = 3000
THREAD_STACK = 256 * 1024


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
