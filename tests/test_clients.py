"""The Python client, the `cocoon` CLI and the generated artefacts, against a live cocoond."""

import asyncio
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cocoon import codegen
from cocoon.client import AsyncClient, Client, CocoonError
from cocoon.registry import registry
from tests.conftest import ROOT

CLI = str(Path(sys.executable).with_name("cocoon"))


def test_generated_stubs_and_method_docs_match_the_registry():
    assert codegen.STUBS.read_text() == codegen.client_stubs(), "run: python manage.py generate"
    assert codegen.DOCS.read_text() == codegen.method_docs(), "run: python manage.py generate"
    for method in registry.all():
        if not method.ws_only:
            assert callable(getattr(Client, method.name.replace(".", "_"))), method.name
            assert callable(getattr(AsyncClient, method.name.replace(".", "_"))), method.name
        assert f"## `{method.name}`" in codegen.DOCS.read_text()


def test_the_python_client_calls_and_raises_translated_errors(cocoond):
    client = Client(cocoond.url, cocoond.token)
    assert client.system_info()["version"] == "0.1.0"
    with pytest.raises(CocoonError) as error:
        Client(cocoond.url, cocoond.token, language="de").call("nope.nope")
    assert (error.value.code, error.value.status) == ("not_found", 404)
    assert error.value.message == "Unbekannte Methode nope.nope."
    with pytest.raises(CocoonError) as error:
        client.tokens_create(name="x", scope="root")
    assert error.value.code == "invalid_params"

    async def asynchronous():
        async_client = AsyncClient(cocoond.url, cocoond.token)
        try:
            return await async_client.system_setup_status()
        finally:
            await async_client.aclose()

    assert asyncio.run(asynchronous())["items"]


def cli(cocoond, home, *args, token="admin", stdin=None):
    env = os.environ | {"XDG_CONFIG_HOME": str(home)}
    env.pop("COCOON_TOKEN", None)
    if token != "admin":
        env["COCOON_TOKEN"] = token
    return subprocess.run(
        [CLI, *args], env=env, capture_output=True, text=True, input=stdin, timeout=120, cwd=ROOT
    )


def test_the_cli_drives_a_sandbox_from_login_to_diff(cocoond, sandbox_image, tmp_path):
    login = cli(cocoond, tmp_path, "login", "--url", cocoond.url, "--token", cocoond.token)
    assert login.returncode == 0, login.stderr
    config = tmp_path / "cocoon" / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    created = cli(cocoond, tmp_path, "sandbox", "create", "--network", "none")
    assert created.returncode == 0, created.stderr
    sandbox = json.loads(created.stdout)["id"]
    executed = cli(cocoond, tmp_path, "sandbox", "exec", sandbox, "--", "sh", "-c", "echo hi; exit 3")
    assert executed.returncode == 3
    assert json.loads(executed.stdout)["stdout"] == "hi\n"
    assert (
        cli(cocoond, tmp_path, "files", "put", sandbox, "notes.txt", stdin="from the cli\n").returncode == 0
    )
    read = json.loads(cli(cocoond, tmp_path, "--json", "files", "cat", sandbox, "notes.txt").stdout)
    assert read == {"content": "from the cli\n", "encoding": "utf-8"}
    diff = json.loads(cli(cocoond, tmp_path, "sandbox", "diff", sandbox).stdout)
    assert [entry["path"] for entry in diff["files"]] == ["notes.txt"]
    listed = json.loads(cli(cocoond, tmp_path, "call", "sandbox.list").stdout)
    assert sandbox in {entry["id"] for entry in listed}
    assert cli(cocoond, tmp_path, "sandbox", "rm", sandbox).returncode == 0


def test_cli_errors_have_exit_codes_and_translated_messages(cocoond, tmp_path):
    cli(cocoond, tmp_path, "login", "--url", cocoond.url, "--token", cocoond.token)
    missing = cli(cocoond, tmp_path, "--lang", "de", "call", "nope.nope")
    assert missing.returncode == 4
    assert json.loads(missing.stderr)["error"]["message"] == "Unbekannte Methode nope.nope."
    invalid = cli(cocoond, tmp_path, "call", "tokens.create", '{"name": 5}')
    assert invalid.returncode == 2
    assert cli(cocoond, tmp_path, "call", "system.info", "{not json").returncode == 2
    assert cli(cocoond, tmp_path, "call", "system.info", token="cct_wrong").returncode == 3


def test_cli_streams_events(cocoond, tmp_path):
    cli(cocoond, tmp_path, "login", "--url", cocoond.url, "--token", cocoond.token)
    env = os.environ | {"XDG_CONFIG_HOME": str(tmp_path)}
    stream = subprocess.Popen(
        [CLI, "events", "--type", "settings.updated"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        time.sleep(1.5)  # let it subscribe
        cocoond.call("settings.update", {"general": {"activityRetentionDays": 77}})
        event = json.loads(stream.stdout.readline())
        assert event["type"] == "settings.updated"
        assert event["data"]["general"]["activityRetentionDays"] == 77
    finally:
        stream.terminate()
        stream.wait(timeout=10)
        cocoond.call("settings.reset", {"keys": ["general.activityRetentionDays"]})


def test_the_cli_spawns_reads_and_attaches_to_an_agent(cocoond, sandbox_image, tmp_path):
    import pty
    import select

    cli(cocoond, tmp_path, "login", "--url", cocoond.url, "--token", cocoond.token)
    sandbox = json.loads(cli(cocoond, tmp_path, "sandbox", "create", "--network", "none").stdout)["id"]
    try:
        agent = json.loads(cli(cocoond, tmp_path, "agent", "spawn", sandbox, "shell").stdout)["id"]
        assert (
            json.loads(cli(cocoond, tmp_path, "agent", "wait", agent, "idle", "--timeout", "30").stdout)[
                "status"
            ]
            == "idle"
        )
        assert cli(cocoond, tmp_path, "agent", "send", agent, "echo via-cli-$((2+3))").returncode == 0
        time.sleep(0.5)
        assert "via-cli-5" in json.loads(cli(cocoond, tmp_path, "agent", "read", agent).stdout)["screen"]

        # `cocoon agent attach` in a real pseudo-terminal: type, read back, detach with Ctrl-].
        pid, master = pty.fork()
        if pid == 0:
            os.environ["XDG_CONFIG_HOME"] = str(tmp_path)
            os.execv(CLI, [CLI, "agent", "attach", agent])

        def read_until(needle: bytes, seen: bytes = b"") -> bytes:
            deadline = time.monotonic() + 15
            while needle not in seen and time.monotonic() < deadline:
                if select.select([master], [], [], 0.5)[0]:
                    seen += os.read(master, 65536)
            return seen

        assert b"\x1b[?1049h" in read_until(b"\x1b[?1049h")  # tmux has taken over the terminal
        os.write(master, b"echo attached-$((1+2))\r")
        assert b"attached-3" in read_until(b"attached-3")
        os.write(master, b"\x1d")
        _pid, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        os.close(master)
        assert json.loads(cli(cocoond, tmp_path, "agent", "get", agent).stdout)["status"] != "exited"
    finally:
        cli(cocoond, tmp_path, "sandbox", "rm", sandbox)
