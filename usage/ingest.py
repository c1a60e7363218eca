"""Reading the credential proxy's usage records into the database, priced.

The proxy appends one JSON line per request to usage.jsonl in the egress directory, opening the file for
each line. Each tick moves the file aside (the proxy's next line starts a new one) and reads the file it
moved aside at the tick before, once no write has touched it for a moment: a line being written while
the file was moved still lands in it, and is read. A record has the proxy's random id: read twice (a
cocoond that stopped between reading and removing), it is stored once. A streamed answer has two lines
under one id: one at its start (what a proxy killed mid-stream leaves) and one at its end, which
replaces it.

What the proxy writes came from a provider's answer and a sandbox's request: every field is checked, and
a record that names an agent of another sandbox counts for its sandbox alone.
"""

import contextlib
import fcntl
import fnmatch
import json
import logging
import os
import re
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.db import transaction

from agents.models import Agent
from cocoon import config
from egress import providers
from egress.policy import node_dir, sandbox_nodes
from sandboxes.models import LOCAL_NODE, Sandbox
from scheduling.models import Task
from usage import budgets
from usage.models import UsageRecord

logger = logging.getLogger(__name__)

USAGE_FILE = "usage.jsonl"  # the proxy's (images/egress-proxy/meter.py USAGE_FILE)
SETTLED_S = 1.0  # no write for this long: every line of a moved file is in it
BATCH = 500
ID = re.compile(r"[0-9a-f]{32}")
SANDBOX_ID = re.compile(r"sb_[a-z0-9]{1,37}")
AGENT_ID = re.compile(r"ag_[a-z0-9]{1,37}")
TOKEN_FIELDS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cacheWriteTokens": "cache_write_tokens",
    "cacheReadTokens": "cache_read_tokens",
}
MAX_TOKENS = 10**12
MAX_COST = Decimal("99999999")  # what the cost column holds
MILLION = Decimal(1_000_000)


def collect(directory: Path | None = None, node: str = LOCAL_NODE) -> int:
    """Store what a node's proxy wrote (in its folder, by default node's); how many new records were
    stored. One collect at a time: a second that came while the first waits (a tick is every 2 s)
    could remove a file the first has not read."""
    directory = directory or node_dir(node)
    current, taken = directory / USAGE_FILE, directory / f"{USAGE_FILE}.collecting"
    stored = None
    with (directory / "usage.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0
        with contextlib.suppress(FileNotFoundError):
            if time.time() - taken.stat().st_mtime < SETTLED_S:
                return 0  # moved a moment ago (a restart): the next tick reads it
            stored = ingest(taken.read_bytes().splitlines(), node)
            taken.unlink()
        with contextlib.suppress(FileNotFoundError):
            os.replace(current, taken)
    if stored is None and node == LOCAL_NODE:
        # Nothing read: today's cap is judged all the same (a new day, a raised cap), once a tick, by
        # the local collect, which every tick makes (not again for each remote node's).
        budgets.evaluate(set(), set())
    return stored or 0


def ingest(lines: list[bytes], node: str = LOCAL_NODE) -> int:
    records = [record for line in lines if (record := parse(line)) is not None]
    # A node's proxy speaks only for its own sandboxes (the local one also for sandboxes deleted since).
    owners = sandbox_nodes({record.sandbox_id for record in records}, node)
    if alien := {sandbox_id for sandbox_id, owner in owners.items() if owner != node}:
        logger.warning("skipping usage records of node %s for sandboxes not its own: %s", node, alien)
        records = [record for record in records if record.sandbox_id not in alien]
    _attribute(records)
    document = config.get_settings()
    prices, kinds = (
        document["usage"]["prices"],
        {
            provider_id: provider["kind"]
            for provider_id, provider in providers.all_providers(document).items()
        },
    )
    for record in records:
        _price(record, prices, kinds.get(record.provider, ""))
    latest: dict[str, UsageRecord] = {}
    for record in records:  # a request's final line knows more than the one at its start
        if record.final or record.pk not in latest:
            latest[record.pk] = record
    stored = 0
    with transaction.atomic():
        pending = list(latest.values())
        for start in range(0, len(pending), BATCH):
            batch = pending[start : start + BATCH]
            known = dict(UsageRecord.objects.filter(pk__in=[r.pk for r in batch]).values_list("pk", "final"))
            fresh = [record for record in batch if record.pk not in known]
            UsageRecord.objects.bulk_create(fresh, ignore_conflicts=True)
            stored += len(fresh)
            # The end of a stream whose start was stored; never the other way round (a file read again).
            for record in batch:
                if record.pk in known and record.final and not known[record.pk]:
                    record.save(force_update=True)
    if records:
        agents = {record.agent_id for record in records} - {""}
        sandboxes = {record.sandbox_id for record in records}
        budgets.evaluate(agents, {record.task_id for record in records} - {""}, sandboxes)
        budgets.cut_off({record.task_id for record in records if record.refused} - {""})
    return stored


def parse(line: bytes) -> UsageRecord | None:
    """One line of the proxy's file as a record, or None (logged) if it is not one."""
    try:
        entry = json.loads(line)
        if not isinstance(entry, dict) or not ID.fullmatch(str(entry.get("id"))):
            raise ValueError("no id")
        sandbox_id = entry.get("sandboxId")
        if not isinstance(sandbox_id, str) or not SANDBOX_ID.fullmatch(sandbox_id):
            raise ValueError("no sandbox")
        agent_id = entry.get("agentId") or ""
        if not isinstance(agent_id, str) or (agent_id and not AGENT_ID.fullmatch(agent_id)):
            raise ValueError("agent")
        record = UsageRecord(
            id=entry["id"],
            at=datetime.fromtimestamp(float(entry["at"]), tz=UTC),
            sandbox_id=sandbox_id,
            agent_id=agent_id,
            provider=_text(entry.get("provider"), 32),
            model=_text(entry.get("model"), 200),
            method=_text(entry.get("method"), 16),
            path=_text(entry.get("path"), 300),
            status=_number(entry.get("status"), 999),
            stream=entry.get("stream") is True,
            complete=entry.get("complete") is True,
            final=entry.get("final") is True,
            refused=entry.get("refused") is True,
            latency_ms=float(min(max(float(entry.get("latencyMs", 0)), 0.0), 86_400_000.0)),
        )
        for wire, name in TOKEN_FIELDS.items():
            setattr(record, name, _number(entry.get(wire), MAX_TOKENS))
    except (ValueError, TypeError, OverflowError, KeyError) as error:
        logger.warning("skipping a malformed usage record: %s", error)
        return None
    return record


def _text(value: Any, limit: int) -> str:
    return "".join(c for c in value[:limit] if c.isprintable()) if isinstance(value, str) else ""


def _number(value: Any, limit: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        return 0
    return value


def _attribute(records: list[UsageRecord]) -> None:
    """The project of each record's sandbox, and the task (and its schedule) its agent works for. An agent
    the record names that is not of the record's sandbox (a sandbox may write any agent id into its
    placeholder) is not believed."""
    agent_ids = {record.agent_id for record in records if record.agent_id}
    agents = {
        agent_id: (sandbox_id, task_id)
        for agent_id, sandbox_id, task_id in Agent.objects.filter(pk__in=agent_ids).values_list(
            "pk", "sandbox_id", "task_id"
        )
    }
    task_ids = {task_id for _sandbox, task_id in agents.values() if task_id}
    schedules = dict(Task.objects.filter(pk__in=task_ids).values_list("pk", "schedule_id"))
    sandbox_ids = {record.sandbox_id for record in records}
    projects = dict(Sandbox.objects.filter(pk__in=sandbox_ids).values_list("pk", "project_id"))
    for record in records:
        record.project = projects.get(record.sandbox_id) or ""
        sandbox_id, task_id = agents.get(record.agent_id, ("", ""))
        if sandbox_id != record.sandbox_id:
            if record.agent_id:
                logger.warning(
                    "usage record %s names agent %s of another sandbox", record.id, record.agent_id
                )
            record.agent_id = ""
            continue
        record.task_id = task_id
        record.schedule_id = schedules.get(task_id) or ""


def price_of(prices: list[dict[str, Any]], provider: str, kind: str, model: str) -> dict[str, Any] | None:
    """The first price entry for this provider (its id or kind, or *) and model (a glob)."""
    for entry in prices:
        if entry["provider"] in {provider, kind, "*"} and fnmatch.fnmatchcase(model, entry["model"]):
            return entry
    return None


def _price(record: UsageRecord, prices: list[dict[str, Any]], kind: str) -> None:
    entry = price_of(prices, record.provider, kind, record.model)
    if entry is None:
        return
    counts = (record.input_tokens, record.output_tokens, record.cache_write_tokens, record.cache_read_tokens)
    rates = (entry["input"], entry["output"], entry["cacheWrite"], entry["cacheRead"])
    total = sum(
        (Decimal(count) * Decimal(str(rate)) for count, rate in zip(counts, rates, strict=True)), Decimal(0)
    )
    record.cost, record.priced = min(total / MILLION, MAX_COST).quantize(Decimal("0.000001")), True
