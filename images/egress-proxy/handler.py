"""What both proxies do with a connection before their own part: its source names the sandbox (in the
policy), its head must arrive in time and parse strictly, and a refusal is answered (and logged)."""

import socket
import socketserver
import time
from typing import Any

import rules
from base import IDLE_TIMEOUT_S, Denied
from denied import denied_log
from hosts import ip_literal
from http1 import Reader, Request, body_length, parse_head, respond

MAX_HEAD = 64 * 1024
HEAD_TIMEOUT_S = 10  # for the whole request head, however slowly it trickles in


class Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        connection: socket.socket = self.request
        source = self.client_address[0]
        ip = ip_literal(source)
        source = str(ip) if ip is not None else source
        self.target = ("", 0)
        try:
            sandbox = rules.policy.sandboxes.get(source)
            reader = Reader(connection, deadline=time.monotonic() + HEAD_TIMEOUT_S)
            request = parse_head(reader.until(b"\r\n\r\n", MAX_HEAD))
            reader.deadline = None
            connection.settimeout(IDLE_TIMEOUT_S)
            if sandbox is None:
                raise Denied("unknown_source")
            self.connection, self.reader, self.length = connection, reader, body_length(request)
            self.serve(request, sandbox, rules.policy)
        except Denied as denied:
            if denied.status == 403:
                denied_log.add(source, *self.target, denied.reason)
            respond(connection, denied.status, denied.reason)
        except OSError:
            pass

    def serve(self, request: Request, sandbox: dict[str, Any], p: rules.Policy) -> None:
        raise NotImplementedError
