"""cocoond across restarts, side by side, with COCOON_CONFIG/COCOON_TOKEN, and what it keeps secret."""

import contextlib
import hashlib
import json
import stat
import subprocess
import sys

import httpx

from tests.conftest import ROOT, Cocoond, free_port, server_env


def database_bytes(instance: Cocoond) -> bytes:
    """The SQLite file with its WAL: everything the database holds on disk."""
    content = b""
    for path in instance.data.glob("cocoon.sqlite3*"):
        with contextlib.suppress(FileNotFoundError):  # the WAL goes when its last connection closes
            content += path.read_bytes()
    return content


def test_state_survives_a_restart_and_the_admin_token_is_not_regenerated(start_cocoond):
    instance = start_cocoond()
    admin_token = instance.token
    agent = instance.call("tokens.create", {"name": "survivor", "scope": "agent"})
    instance.call("settings.update", {"sandbox": {"network": "open"}})
    instance.call("secrets.set", {"name": "GITHUB_TOKEN", "value": "ghp_survives"})
    before = instance.call("activity.list")

    instance.restart()

    assert instance.token == admin_token
    assert instance.call("system.info", token=agent["token"])["version"]
    assert instance.call("settings.get")["sandbox"]["network"] == "open"
    assert [secret["name"] for secret in instance.call("secrets.list")] == ["GITHUB_TOKEN"]
    after = instance.call("activity.list")
    assert [entry["id"] for entry in after[-len(before) :]] == [entry["id"] for entry in before]
    assert [token["name"] for token in instance.call("tokens.list")] == ["admin", "survivor"]


def test_data_directory_and_secret_files_are_private(start_cocoond):
    instance = start_cocoond()
    instance.call("secrets.set", {"name": "ANY", "value": "v"})
    assert stat.S_IMODE(instance.data.stat().st_mode) == 0o700
    for name in ("admin-token.txt", "secrets.key", "django-secret-key.txt", "cocoon.sqlite3"):
        assert stat.S_IMODE((instance.data / name).stat().st_mode) == 0o600, name


def test_tokens_are_stored_only_as_hashes(start_cocoond):
    instance = start_cocoond()
    agent = instance.call("tokens.create", {"name": "hashed", "scope": "agent"})
    stored = database_bytes(instance)
    for plain in (instance.token, agent["token"]):
        assert plain.encode() not in stored
    assert hashlib.sha256(agent["token"].encode()).hexdigest().encode() in stored
    listed = json.dumps(instance.call("tokens.list"))
    assert agent["token"] not in listed
    assert instance.token not in listed


def test_secret_values_never_leave_in_clear_text(start_cocoond):
    instance = start_cocoond()
    value = "sk-ant-very-secret-value-0123456789"
    with instance.ws() as ws:
        ws.call("events.subscribe", {})
        instance.call("secrets.set", {"name": "ANTHROPIC_API_KEY", "value": value})
        frames = [ws.next_event() for _ in range(1)]
    assert value not in json.dumps(frames)
    assert value.encode() not in database_bytes(instance)
    # Every method's output, whatever it is asked (those that need params answer with an error).
    for method in instance.call("system.methods"):
        if method["wsOnly"]:
            continue
        response = instance.post(method["name"], {})
        assert value not in response.text, method["name"]
    # A wrongly typed value is rejected without echoing it.
    response = instance.post("secrets.set", {"name": "ANTHROPIC_API_KEY", "value": [value]})
    assert response.json()["error"]["code"] == "invalid_params"
    assert value not in response.text
    instance.stop()
    assert value not in instance.log.read_text()


def test_two_instances_run_side_by_side(start_cocoond):
    first, second = start_cocoond(), start_cocoond()
    assert first.port != second.port
    assert first.token != second.token
    assert first.call("system.info")["version"] == second.call("system.info")["version"]
    assert first.post("system.info", token=second.token).status_code == 401
    first.call("settings.update", {"general": {"language": "de"}})
    assert second.call("settings.get")["general"]["language"] == "en"


def test_cocoon_config_is_applied_only_on_the_first_start(start_cocoond, tmp_path):
    config = tmp_path / "cocoon.yaml"
    config.write_text("general:\n  language: de\nsandbox:\n  network: none\n")
    instance = start_cocoond(env={"COCOON_CONFIG": str(config)})
    document = instance.call("settings.get")
    assert (document["general"]["language"], document["sandbox"]["network"]) == ("de", "none")
    # The stored default language now applies to requests that name none.
    assert instance.post("nope.nope", {}).json()["error"]["message"] == "Unbekannte Methode nope.nope."
    instance.call("settings.update", {"general": {"language": "en"}})
    config.write_text('{"sandbox": {"network": "open"}}')
    instance.restart()
    document = instance.call("settings.get")
    assert (document["general"]["language"], document["sandbox"]["network"]) == ("en", "none")


def test_an_invalid_cocoon_config_stops_the_first_start_and_leaves_nothing(tmp_path):
    config = tmp_path / "bad.json"
    config.write_text('{"sandbox": {"limits": {"cpus": "many"}}, "general": {"language": "fr"}}')
    data = tmp_path / "data"
    result = subprocess.run(
        [sys.executable, "manage.py", "cocoond"],
        cwd=ROOT,
        env=server_env(
            COCOON_DATA=str(data), COCOON_BIND=f"127.0.0.1:{free_port()}", COCOON_CONFIG=str(config)
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "COCOON_CONFIG is invalid" in result.stderr
    assert "general.language" in result.stderr
    assert "sandbox.limits.cpus" in result.stderr
    assert not (data / "admin-token.txt").exists()
    rows = subprocess.run(
        ["sqlite3", str(data / "cocoon.sqlite3"), "select count(*) from cocoon_apitoken"],
        capture_output=True,
        text=True,
    )
    assert rows.stdout.strip() in {"0", ""}


def test_cocoon_token_from_the_environment_is_an_admin_token(start_cocoond):
    instance = start_cocoond(env={"COCOON_TOKEN": "cct_from_environment_0123456789"})
    assert instance.call("settings.get", token="cct_from_environment_0123456789")["general"]
    assert b"cct_from_environment_0123456789" not in database_bytes(instance)


def test_revoked_tokens_stop_working_at_once(start_cocoond):
    instance = start_cocoond()
    agent = instance.call("tokens.create", {"name": "short-lived", "scope": "agent"})
    assert instance.call("tokens.revoke", {"tokenId": agent["id"]}) == {}
    assert instance.post("system.info", token=agent["token"]).status_code == 401
    assert instance.post("tokens.revoke", {"tokenId": agent["id"]}).json()["error"]["code"] == "not_found"


def test_the_last_admin_token_cannot_be_revoked(start_cocoond):
    instance = start_cocoond()
    bootstrap = next(token for token in instance.call("tokens.list") if token["name"] == "admin")
    response = instance.post("tokens.revoke", {"tokenId": bootstrap["id"]})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    # With a second admin token it can go, and its file goes with it.
    second = instance.call("tokens.create", {"name": "ops", "scope": "admin"})
    instance.call("tokens.revoke", {"tokenId": bootstrap["id"]}, token=second["token"])
    assert not (instance.data / "admin-token.txt").exists()
    assert instance.post("system.info", token=second["token"]).status_code == 200


def test_setup_status_lists_the_admin_token_in_the_request_language(cocoond):
    status = cocoond.post("system.setup_status", {}, headers={"x-cocoon-lang": "de"}).json()["result"]
    item = next(item for item in status["items"] if item["key"] == "adminToken")
    assert item == {
        "key": "adminToken",
        "title": "Admin-Token",
        "ok": True,
        "detail": "Ein Admin-Token ist vorhanden.",
        "fix": None,
    }


def test_the_admin_site_is_served(cocoond):
    assert httpx.get(f"{cocoond.url}/admin/login/").status_code == 200
