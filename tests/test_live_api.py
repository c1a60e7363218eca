"""The HTTP and WebSocket contract, against a real cocoond subprocess (SPEC §2.1, §2.4)."""

import httpx
import pytest
from websockets.exceptions import ConnectionClosed


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_healthz_needs_no_token(cocoond):
    response = httpx.get(f"{cocoond.url}/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_system_info_with_the_admin_token(cocoond):
    info = cocoond.call("system.info")
    assert info["version"] == "0.1.0"
    assert info["embeddedWorker"] is True
    assert info["languages"] == ["en", "de"]


def test_it_rejects_a_missing_token_with_401(cocoond):
    response = cocoond.post("system.info", token=None)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "authorization",
    ["Bearer cct_wrong", "Bearer", "Basic dXNlcjpwYXNz", "Bearer " + "x" * 5000, "Bearer cct_\u00e4\u00f6"],
)
def test_it_rejects_bad_tokens(cocoond, authorization):
    response = httpx.post(
        f"{cocoond.url}/v1/rpc/system.info", headers={"Authorization": authorization.encode()}
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_token_in_query_string_works_and_is_not_logged(cocoond):
    response = httpx.post(f"{cocoond.url}/v1/rpc/system.info", params={"token": cocoond.token})
    assert response.status_code == 200
    assert cocoond.token not in cocoond.log.read_text()
    assert "token=[redacted]" in cocoond.log.read_text()


def test_an_agent_token_gets_403_on_admin_methods(cocoond):
    agent = cocoond.call("tokens.create", {"name": "agent-1", "scope": "agent"})
    response = cocoond.post("settings.update", {"general": {"language": "de"}}, token=agent["token"])
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert cocoond.call("settings.get")["general"]["language"] == "en"
    # ...but it may call what is not admin, and the catalogue shows it only that.
    assert cocoond.call("system.info", token=agent["token"])["version"]
    names = {method["name"] for method in cocoond.call("system.methods", token=agent["token"])}
    assert "system.info" in names
    assert not names & {"settings.update", "secrets.list", "tokens.create"}


def test_unknown_method_is_not_found(cocoond):
    response = cocoond.post("sandbox.teleport", {})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "not_found"
    assert "sandbox.teleport" in error["message"]


def test_wrong_param_types_are_invalid_params_with_field_details(cocoond):
    response = cocoond.post("tokens.create", {"name": 7, "scope": "root", "extra": True})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_params"
    fields = {(field["path"], field["code"]) for field in error["details"]["fields"]}
    assert fields == {("name", "type"), ("scope", "enum"), ("extra", "unknown_field")}


def test_missing_params_are_reported_per_field(cocoond):
    error = cocoond.post("secrets.set", {}).json()["error"]
    assert {field["path"] for field in error["details"]["fields"]} == {"name", "value"}
    assert {field["code"] for field in error["details"]["fields"]} == {"required"}


def test_malformed_json_is_a_clear_error(cocoond):
    response = cocoond.post("system.info", content=b'{"oops": ')
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    assert error["details"] == {"line": 1, "column": 10}


def test_params_must_be_an_object(cocoond):
    response = cocoond.post("system.info", content=b"[1, 2]")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


def test_get_on_an_rpc_url_is_method_not_allowed(cocoond):
    response = httpx.get(
        f"{cocoond.url}/v1/rpc/system.info", headers={"Authorization": f"Bearer {cocoond.token}"}
    )
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert response.headers["allow"] == "POST"
    assert httpx.get(f"{cocoond.url}/v1/rpc/system.info").status_code == 401  # the token comes first


@pytest.mark.parametrize("path", ["/v1/rpc/", "/v1/rpc/system.info/more", "/v1/rpc//system.info"])
def test_what_is_not_an_rpc_url_is_not_found(cocoond, path):
    response = httpx.post(f"{cocoond.url}{path}", headers={"Authorization": f"Bearer {cocoond.token}"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_body_over_the_limit_is_refused(cocoond):
    response = cocoond.post("files.write", content=b" " * (40 * 1024 * 1024 + 1))
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid_request",
        "message": "The request body is too large.",
        "details": {},
    }
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_errors_are_translated_by_header_query_and_accept_language(cocoond):
    german = cocoond.post("sandbox.teleport", {}, headers={"x-cocoon-lang": "de"}).json()["error"]
    assert german == {"code": "not_found", "message": "Unbekannte Methode sandbox.teleport.", "details": {}}
    by_query = cocoond.post("sandbox.teleport", {}, query={"lang": "de"}).json()["error"]
    assert by_query["message"] == german["message"]
    by_browser = cocoond.post("sandbox.teleport", {}, headers={"accept-language": "de-DE,de;q=0.9"}).json()
    assert by_browser["error"]["message"] == german["message"]
    fields = cocoond.post("tokens.create", {"name": 1, "scope": "agent"}, headers={"x-cocoon-lang": "de"})
    assert fields.json()["error"]["details"]["fields"][0]["message"] == "Muss vom Typ string sein."
    unauthorized = cocoond.post("system.info", token=None, headers={"x-cocoon-lang": "de"})
    assert unauthorized.json()["error"]["message"] == "Ein gültiges Token ist erforderlich."
    english = cocoond.post("sandbox.teleport", {}, headers={"x-cocoon-lang": "en"}).json()["error"]
    assert english["message"] == "Unknown method sandbox.teleport."


def test_openapi_document_lists_every_http_method(cocoond):
    response = httpx.get(
        f"{cocoond.url}/v1/openapi.json", headers={"Authorization": f"Bearer {cocoond.token}"}
    )
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"] == "3.1.0"
    catalogue = {method["name"] for method in cocoond.call("system.methods") if not method["wsOnly"]}
    assert {path.removeprefix("/v1/rpc/") for path in document["paths"]} == catalogue
    operation = document["paths"]["/v1/rpc/tokens.create"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"]["required"] == ["name", "scope"]
    assert operation["x-cocoon-admin"] is True
    assert httpx.get(f"{cocoond.url}/v1/openapi.json").status_code == 401


def test_ws_rpc_round_trip(cocoond):
    with cocoond.ws() as ws:
        frame = ws.request("system.info")
        assert frame["id"] == 1
        assert frame["result"]["version"] == "0.1.0"
        error = ws.request("sandbox.teleport")["error"]
        assert error["code"] == "not_found"


def test_ws_answers_errors_in_the_connection_language(cocoond):
    with cocoond.ws(headers={"x-cocoon-lang": "de"}) as ws:
        assert ws.request("sandbox.teleport")["error"]["message"] == "Unbekannte Methode sandbox.teleport."
        ws.send("{not json")
        assert ws.receive()["error"] == {
            "code": "invalid_json",
            "message": "Der Anfrageinhalt ist kein gültiges JSON.",
            "details": {},
        }
        ws.send({"id": 9, "params": {}})
        assert ws.receive() == {
            "id": 9,
            "error": {
                "code": "invalid_request",
                "message": 'Ein Frame ist {"id", "method", "params"}.',
                "details": {},
            },
        }


def test_ws_without_a_token_is_closed_as_unauthorized(cocoond):
    with cocoond.ws(token=None) as ws:
        assert ws.receive()["error"]["code"] == "unauthorized"
        with pytest.raises(ConnectionClosed) as closed:
            ws.receive()
        assert closed.value.rcvd.code == 4401


def test_events_subscribe_filters_by_type(cocoond):
    with cocoond.ws() as ws:
        subscription = ws.call("events.subscribe", {"types": ["settings.updated"]})["subscription"]
        cocoond.call("secrets.set", {"name": "NOISE", "value": "x"})  # an `activity` event, filtered out
        cocoond.call("settings.update", {"general": {"activityRetentionDays": 30}})
        frame = ws.next_event()
        assert frame["subscription"] == subscription
        assert frame["event"]["type"] == "settings.updated"
        assert frame["event"]["data"]["general"]["activityRetentionDays"] == 30
        assert ws.call("events.unsubscribe", {"subscription": subscription}) == {}
        cocoond.call("settings.reset", {"keys": ["general.activityRetentionDays"]})
        assert ws.request("system.info")["id"] == ws.next_id  # no event frame came before the answer
        assert ws.pending == []


def test_activity_events_arrive_rendered_in_the_connection_language(cocoond):
    with cocoond.ws(headers={"x-cocoon-lang": "de"}) as ws:
        ws.call("events.subscribe", {"types": ["activity"]})
        cocoond.call("secrets.set", {"name": "DE_SECRET", "value": "x"})
        event = ws.next_event()["event"]
        assert event["data"]["key"] == "secret.set"
        assert event["data"]["message"] == "Secret DE_SECRET wurde gespeichert."


def test_events_unsubscribe_of_an_unknown_subscription_is_not_found(cocoond):
    with cocoond.ws() as ws:
        assert ws.request("events.unsubscribe", {"subscription": "sub_nope"})["error"]["code"] == "not_found"


def test_events_subscribe_over_http_points_to_the_websocket(cocoond):
    response = cocoond.post("events.subscribe", {})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert "/v1/ws" in response.json()["error"]["message"]


def test_embedded_worker_runs_tasks_and_its_events_reach_websockets(cocoond):
    cocoond.call("secrets.set", {"name": "TO_BE_PRUNED", "value": "x"})
    with cocoond.ws() as ws:
        ws.call("events.subscribe", {"types": ["activity"]})
        assert cocoond.call("activity.prune", {"olderThanDays": 0}) == {"queued": True}
        event = ws.next_event(timeout=20)["event"]
        assert event["data"]["key"] == "activity.pruned"
        assert event["data"]["params"]["count"] >= 1
        assert event["data"]["message"].endswith("old activity entries were removed.")
