"""The exchange with a remote node's egress proxy (images/egress-proxy/exchange.py), run here on a folder
of its own: what cocoond sends and takes must never bring back an older policy or drop what was not sent.
The whole way through a node's engine is in test_nodes.py."""

import importlib.util
import io
import json
import os
import sys
import types
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "images" / "egress-proxy" / "exchange.py"


@pytest.fixture
def exchange(tmp_path, monkeypatch):
    monkeypatch.setenv("COCOON_EGRESS_DIR", str(tmp_path))
    spec = importlib.util.spec_from_file_location("exchange", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def push(exchange, monkeypatch, version: int) -> None:
    stdin = types.SimpleNamespace(buffer=io.BytesIO(json.dumps({"version": version}).encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    exchange.push(0)


def take(exchange, capsysbinary) -> tuple[dict, bytes]:
    capsysbinary.readouterr()
    exchange.take()
    header, _, payload = capsysbinary.readouterr().out.partition(b"\n")
    return json.loads(header), payload


def test_a_push_overtaken_by_a_newer_one_never_brings_the_older_policy_back(exchange, tmp_path, monkeypatch):
    push(exchange, monkeypatch, 7)  # a revocation
    push(exchange, monkeypatch, 5)  # sent before it, arriving after it
    assert json.loads((tmp_path / "policy.json").read_text())["version"] == 7
    push(exchange, monkeypatch, 9)
    assert json.loads((tmp_path / "policy.json").read_text())["version"] == 9


def test_a_drop_removes_only_what_its_own_take_sent(exchange, tmp_path, capsysbinary):
    (tmp_path / "usage.jsonl").write_bytes(b'{"n": 1}\n{"n": 2}\n')
    assert take(exchange, capsysbinary)[0]["usage"] == 0  # moved aside first: a line may still land
    held = tmp_path / "usage.jsonl.taken"
    os.utime(held, (1, 1))  # settled
    header, payload = take(exchange, capsysbinary)
    assert payload == b'{"n": 1}\n{"n": 2}\n'
    mark = f"{header['inodes'][0]}:{header['usage']}"

    # Another take's drop replaced the file meanwhile: this drop is not for it.
    replaced = tmp_path / "other"
    replaced.write_bytes(b'{"n": 3}\n')
    os.replace(replaced, held)
    exchange.drop([mark, "0:0"])
    assert held.read_bytes() == b'{"n": 3}\n'

    os.utime(held, (1, 1))
    header, payload = take(exchange, capsysbinary)
    exchange.drop([f"{header['inodes'][0]}:{header['usage']}", "0:0"])
    assert not held.exists()


def test_an_empty_or_oversized_file_taken_does_not_block_the_next_ones(exchange, tmp_path, capsysbinary):
    held = tmp_path / "usage.jsonl.taken"
    held.write_bytes(b"x" * (exchange.LIMIT + 10) + b"\n")  # no record is that long
    os.utime(held, (1, 1))
    assert take(exchange, capsysbinary)[0]["usage"] == 0
    assert not held.exists()  # gone, so the next file can be moved aside
    (tmp_path / "usage.jsonl").write_bytes(b'{"n": 4}\n')
    take(exchange, capsysbinary)
    assert held.read_bytes() == b'{"n": 4}\n'


def test_only_whole_lines_are_sent_and_a_part_of_one_left_alone_goes(exchange, tmp_path, capsysbinary):
    held = tmp_path / "usage.jsonl.taken"
    held.write_bytes(b'{"n": 5}\n{"n": 6')  # a proxy killed mid-line
    os.utime(held, (1, 1))
    header, payload = take(exchange, capsysbinary)
    assert payload == b'{"n": 5}\n'
    exchange.drop([f"{header['inodes'][0]}:{header['usage']}", "0:0"])
    os.utime(held, (1, 1))
    assert take(exchange, capsysbinary)[0]["usage"] == 0
    assert not held.exists()
