"""Egress control against the real proxy container, real egress sandboxes and a recording stand-in
for the internet (tests/upstream.py): allowlist, adversarial requests, denied log and one-click allow,
the credential proxy and providers."""

import json
import time

import pytest

from tests.conftest import wait_until
from tests.upstream import NAMES, STANDIN_KEY, public_upstream

ALLOWED = ["allowed.invalid", "*.allowed.invalid", "llm.invalid"]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    with public_upstream(tmp_path_factory.mktemp("upstream")) as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def egress(cocoond, sandbox_image, upstream):
    """The shared cocoond pointed at the stand-in (names under .invalid, its CA), and one egress sandbox."""
    hosts = {name: upstream.address for name in NAMES} | {"private.invalid": "10.11.12.13"}
    cocoond.call(
        "settings.update",
        {"egress": {"allowlist": ALLOWED + ["private.invalid"], "hosts": hosts, "caBundle": upstream.ca_pem}},
    )
    sandbox = cocoond.call("sandbox.create", {"network": "egress", "image": sandbox_image})
    yield sandbox
    cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})
    cocoond.call("settings.reset", {"keys": ["egress", "providers"]})


def sh(cocoond, sandbox, script, **params):
    return cocoond.call(
        "sandbox.exec", {"sandboxId": sandbox["id"], "command": ["bash", "-c", script], **params}
    )


def curl(cocoond, sandbox, *args):
    """curl inside the sandbox (the proxy comes from its environment); returns (HTTP code, body)."""
    quoted = " ".join(json.dumps(arg) for arg in args)
    result = sh(
        cocoond, sandbox, f"curl -sS --max-time 10 -o /tmp/body -w '%{{http_code}}' {quoted}; cat /tmp/body"
    )
    out = result["stdout"]
    assert out[:3].isdigit(), result
    return int(out[:3]), out[3:]


def raw_proxy(cocoond, sandbox, request, port=3128):
    """Bytes written straight to the proxy over bash's /dev/tcp; returns the answer."""
    script = f"exec 3<>/dev/tcp/cocoon-proxy/{port}; printf %b {json.dumps(request)} >&3; timeout 5 cat <&3"
    return sh(cocoond, sandbox, script)["stdout"]


def recorded(upstream, **match):
    return [
        request
        for request in upstream.requests()
        if all(request.get(key) == value for key, value in match.items())
    ]


def denied(cocoond, host):
    return [row for row in cocoond.call("egress.denied") if row["host"] == host]


def test_an_egress_sandbox_reaches_an_allowed_host_through_the_proxy(cocoond, egress, upstream):
    upstream.clear()
    # HTTPS: a CONNECT tunnel, TLS end to end with the stand-in (the sandbox trusts the test CA here).
    sh(cocoond, egress, "cat > /tmp/ca.pem", stdin=upstream.ca_pem)
    code, body = curl(cocoond, egress, "--cacert", "/tmp/ca.pem", "https://allowed.invalid/hello")
    assert (code, body) == (200, "upstream allowed.invalid /hello")
    # Plain HTTP on port 80, and a wildcard entry.
    code, body = curl(cocoond, egress, "http://api.allowed.invalid/plain")
    assert (code, body) == (200, "upstream api.allowed.invalid /plain")
    assert [r["port"] for r in upstream.requests()] == [443, 80]


def test_a_denied_host_is_refused_recorded_and_allowed_with_one_call(cocoond, egress, upstream):
    upstream.clear()
    code, _ = curl(cocoond, egress, "http://denied.invalid/first")
    assert code == 403
    assert recorded(upstream) == []
    rows = wait_until(lambda: denied(cocoond, "denied.invalid"), timeout=10)
    assert (
        rows[0]["sandboxId"] == egress["id"] and rows[0]["port"] == 80 and rows[0]["reason"] == "not_allowed"
    )

    started = time.monotonic()
    cocoond.call("egress.allow", {"host": "denied.invalid", "sandboxId": egress["id"]})
    assert time.monotonic() - started < 5
    code, body = curl(cocoond, egress, "http://denied.invalid/second")
    assert (code, body) == (200, "upstream denied.invalid /second")
    assert denied(cocoond, "denied.invalid") == []


def test_without_the_proxy_nothing_goes_out_and_no_lookup_leaves(cocoond, egress, upstream):
    direct = sh(cocoond, egress, f"curl -sS --noproxy '*' --max-time 3 http://{upstream.address}/direct")
    assert direct["exitCode"] != 0
    lookup = sh(cocoond, egress, "getent hosts example.com || echo no-answer")
    assert "no-answer" in lookup["stdout"]
    assert recorded(upstream, path="/direct") == []


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("allowed.invalid:22", "port"),
        ("allowed.invalid:8443", "port"),
        ("11.0.0.1:443", "ip_literal"),
        ("127.0.0.1:443", "ip_literal"),
        ("2130706433:443", "ip_literal"),
        ("0x7f.0.0.1:443", "ip_literal"),
        ("[::ffff:127.0.0.1]:443", "ip_literal"),
        ("169.254.169.254:80", "ip_literal"),
        ("localhost:443", "not_allowed"),
        ("private.invalid:443", "private_address"),
        ("evilallowed.invalid:443", "not_allowed"),
        ("allowed.invalid.evil.invalid:443", "not_allowed"),
        ("cocoon-proxy:8080", "port"),
        ("cocoon-proxy:3128", "port"),
        ("cocoon-proxy:443", "not_allowed"),
    ],
)
def test_connect_refusals(cocoond, egress, upstream, target, reason):
    upstream.clear()
    answer = raw_proxy(cocoond, egress, f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n")
    assert answer.startswith("HTTP/1.1 403"), answer
    assert json.loads(answer.split("\r\n\r\n", 1)[1])["error"]["code"] == reason
    assert recorded(upstream) == []


@pytest.mark.parametrize(
    "request_text",
    [
        # The Host header names another site than the request line.
        "GET http://allowed.invalid/x HTTP/1.1\\r\\nHost: denied.invalid\\r\\n\\r\\n",
        # Two Host headers.
        "GET http://allowed.invalid/x HTTP/1.1\\r\\nHost: allowed.invalid\\r\\nHost: denied.invalid\\r\\n\\r\\n",
        # userinfo tricks.
        "GET http://allowed.invalid@denied.invalid/x HTTP/1.1\\r\\nHost: denied.invalid\\r\\n\\r\\n",
        "CONNECT allowed.invalid@denied.invalid:443 HTTP/1.1\\r\\n\\r\\n",
        # CONNECT whose Host header disagrees with its target.
        "CONNECT evilallowed.invalid:443 HTTP/1.1\\r\\nHost: allowed.invalid:443\\r\\n\\r\\n",
        "CONNECT allowed.invalid:443 HTTP/1.1\\r\\nHost: evilallowed.invalid:443\\r\\n\\r\\n",
        # Not a proxy request at all (origin form).
        "GET /x HTTP/1.1\\r\\nHost: allowed.invalid\\r\\n\\r\\n",
    ],
)
def test_header_tricks_are_refused(cocoond, egress, upstream, request_text):
    upstream.clear()
    answer = raw_proxy(cocoond, egress, request_text)
    assert answer.startswith(("HTTP/1.1 403", "HTTP/1.1 400")), answer
    assert recorded(upstream) == []


def test_mixed_case_and_trailing_dot_are_the_same_allowed_host(cocoond, egress, upstream):
    upstream.clear()
    answer = raw_proxy(
        cocoond,
        egress,
        "GET http://ALLOWED.invalid./case HTTP/1.1\\r\\nHost: allowed.INVALID\\r\\n"
        "X-Forwarded-For: 1.2.3.4\\r\\nForwarded: for=1.2.3.4\\r\\n\\r\\n",
    )
    assert answer.startswith("HTTP/1.0 200") or answer.startswith("HTTP/1.1 200"), answer
    [request] = recorded(upstream, path="/case")
    names = {name for name, _ in request["headers"]}
    assert "x-forwarded-for" not in names and "forwarded" not in names
    assert dict(request["headers"])["host"] == "allowed.invalid"


def test_a_pipelined_second_request_never_reaches_anyone(cocoond, egress, upstream):
    upstream.clear()
    answer = raw_proxy(
        cocoond,
        egress,
        "GET http://allowed.invalid/one HTTP/1.1\\r\\nHost: allowed.invalid\\r\\n\\r\\n"
        "GET http://denied.invalid/two HTTP/1.1\\r\\nHost: denied.invalid\\r\\n\\r\\n",
    )
    assert "upstream allowed.invalid /one" in answer
    assert [r["path"] for r in upstream.requests()] == ["/one"]


def test_an_unknown_source_is_refused(cocoond, egress, upstream, docker_client, sandbox_image):
    upstream.clear()
    # A container on the internal network that is no sandbox of cocoon's.
    stranger = docker_client.containers.run(
        sandbox_image,
        ["curl", "-sS", "-x", "http://cocoon-proxy:3128", "http://allowed.invalid/"],
        network=f"{cocoond.instance}-internal",
        labels={"io.cocoon.instance": cocoond.instance},
        detach=True,
    )
    try:
        assert stranger.wait(timeout=30)["StatusCode"] == 0
        assert json.loads(stranger.logs())["error"]["code"] == "unknown_source"
    finally:
        stranger.remove(force=True)
    assert recorded(upstream) == []


def test_policy_changes_are_acknowledged_within_a_second(cocoond, egress):
    before = cocoond.call("egress.status")
    assert before["running"] and before["acknowledgedVersion"] == before["policyVersion"]
    started = time.monotonic()
    cocoond.call("settings.update", {"egress": {"allowlist": [*ALLOWED, "private.invalid", "later.invalid"]}})
    after = wait_until(
        lambda: (
            (status := cocoond.call("egress.status"))["acknowledgedVersion"] != before["policyVersion"]
            and status
        ),
        timeout=5,
    )
    assert time.monotonic() - started < 1.5
    assert after["acknowledgedVersion"] == after["policyVersion"] > before["policyVersion"]


def test_a_killed_proxy_is_restarted_and_the_checklist_shows_the_outage(cocoond, egress, docker_client):
    docker_client.containers.get(f"{cocoond.instance}-egress-proxy").kill()
    items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
    assert items["egressProxy"]["ok"] is False
    wait_until(lambda: cocoond.call("egress.status")["running"], timeout=20)
    assert curl(cocoond, egress, "http://allowed.invalid/after-restart") == (
        200,
        "upstream allowed.invalid /after-restart",
    )
