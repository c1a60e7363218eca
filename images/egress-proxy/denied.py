"""Denied attempts, folded in memory and appended to denied.jsonl, which cocoond collects."""

import collections
import json
import os
import sys
import threading
import time
from typing import Any

import rules
from base import DIR

DENIED_FLUSH_S = 1.0
MAX_DENIED_HOSTS = 20  # distinct hosts per source and flush; the rest are counted under OTHER_HOSTS
OTHER_HOSTS = "*"


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
            sandbox = rules.policy.sandboxes.get(source, {}).get("id")
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
