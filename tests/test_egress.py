"""Egress control against the real proxy container, real egress sandboxes and a recording stand-in
for the internet (tests/upstream.py): allowlist, adversarial requests, denied log and one-click allow,
the credential proxy and providers."""

import itertools
import json
import secrets
import socket
import subprocess
import threading
import time

import pytest

from tests.conftest import wait_until
from tests.leakcheck import assert_secret_absent
from tests.upstream import NAMES, STANDIN_KEY

# localhost and private.invalid are allowed by name, but resolve to non-public addresses.
ALLOWED = ["allowed.invalid", "*.allowed.invalid", "llm.invalid", "private.invalid", "localhost"]


@pytest.fixture(scope="module")
def egress(cocoond, sandbox_image, upstream):
    """The shared cocoond pointed at the stand-in (names under .invalid, its CA), and one egress sandbox."""
    hosts = {name: upstream.address for name in NAMES} | {"private.invalid": "10.11.12.13"}
    cocoond.call(
        "settings.update",
        {"egress": {"allowlist": ALLOWED, "hosts": hosts, "caBundle": upstream.ca_pem}},
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


def denied(cocoond, host, sandbox):
    """The denied rows of one sandbox for host (other tests' sandboxes leave rows of their own)."""
    rows = cocoond.call("egress.denied", {"sandboxId": sandbox["id"]})
    return [row for row in rows if row["host"] == host]


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
    rows = wait_until(lambda: denied(cocoond, "denied.invalid", egress), timeout=10)
    assert rows[0]["sandboxId"] == egress["id"]
    assert rows[0]["port"] == 80
    assert rows[0]["reason"] == "not_allowed"

    started = time.monotonic()
    cocoond.call("egress.allow", {"host": "denied.invalid", "sandboxId": egress["id"]})
    assert time.monotonic() - started < 5
    code, body = curl(cocoond, egress, "http://denied.invalid/second")
    assert (code, body) == (200, "upstream denied.invalid /second")
    assert denied(cocoond, "denied.invalid", egress) == []


def test_without_the_proxy_nothing_goes_out(cocoond, egress, upstream):
    direct = sh(cocoond, egress, f"curl -sS --noproxy '*' --max-time 3 http://{upstream.address}/direct")
    assert direct["exitCode"] != 0
    assert recorded(upstream, path="/direct") == []


def _uplink() -> str:
    """The host's interface towards its resolvers and the world (the default route's)."""
    route = subprocess.run(
        ["ip", "-j", "route", "show", "default"], capture_output=True, text=True, check=True
    )
    return json.loads(route.stdout)[0]["dev"]


def _sniff(interface: str, label: bytes, seen: list, stop: threading.Event) -> None:
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003)) as raw:
        raw.bind((interface, 0))
        raw.settimeout(0.2)
        while not stop.is_set():
            try:
                if label in raw.recv(65535):
                    seen.append(label)
            except TimeoutError:
                continue


def lookup_leaves(cocoond, sandbox) -> bool:
    """Whether a lookup of a fresh external name from the sandbox shows up on the host's uplink."""
    label = f"cocoonleak{secrets.token_hex(6)}"
    seen, stop = [], threading.Event()
    sniffer = threading.Thread(target=_sniff, args=(_uplink(), label.encode(), seen, stop))
    sniffer.start()
    try:
        time.sleep(0.3)
        sh(cocoond, sandbox, f"getent hosts {label}.example.com; true")
        time.sleep(1)
    finally:
        stop.set()
        sniffer.join()
    return bool(seen)


def test_no_name_lookup_leaves_the_machine_from_an_egress_sandbox(cocoond, egress, sandbox_image):
    opened = cocoond.call("sandbox.create", {"network": "open", "image": sandbox_image})
    try:
        # The control: from an open sandbox the same kind of lookup does reach the host's resolvers.
        assert lookup_leaves(cocoond, opened)
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": opened["id"]})
    assert not lookup_leaves(cocoond, egress)


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
        ("localhost:443", "private_address"),  # the proxy's own resolver says loopback
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
        "GET http://allowed.invalid/x HTTP/1.1\\r\\nHost: allowed.invalid\\r\\n"
        "Host: denied.invalid\\r\\n\\r\\n",
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
    assert "x-forwarded-for" not in names
    assert "forwarded" not in names
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
    # A container on a sandbox's network that is no sandbox of cocoon's.
    stranger = docker_client.containers.run(
        sandbox_image,
        ["curl", "-sS", "-x", "http://cocoon-proxy:3128", "http://allowed.invalid/"],
        network=f"{cocoond.instance}-{egress['id']}-net",
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
    assert before["running"]
    assert before["acknowledgedVersion"] == before["policyVersion"]
    started = time.monotonic()
    cocoond.call("settings.update", {"egress": {"allowlist": [*ALLOWED, "later.invalid"]}})
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
    wait_until(
        lambda: (status := cocoond.call("egress.status"))["acknowledgedVersion"] == status["policyVersion"],
        timeout=20,
    )
    assert curl(cocoond, egress, "http://allowed.invalid/after-restart") == (
        200,
        "upstream allowed.invalid /after-restart",
    )


# -- the credential proxy ---------------------------------------------------------------------------

STANDIN = {
    "kind": "anthropic",
    "baseUrl": "https://llm.invalid/api",
    "secret": "STANDIN_SECRET",
    "auth": "x-api-key",
}


@pytest.fixture(scope="module")
def provider(cocoond, egress):
    cocoond.call("settings.update", {"providers": {"standin": STANDIN}})
    cocoond.call("secrets.set", {"name": "STANDIN_SECRET", "value": STANDIN_KEY})
    yield "standin"
    cocoond.post("secrets.delete", {"name": "STANDIN_SECRET"})


def shell_agent(cocoond, sandbox, **params):
    agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell", **params})
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 20})
    return agent


def in_agent(cocoond, agent, sandbox, command, output):
    """Run command in the agent's shell (where its env is) and return what it wrote to output."""
    cocoond.call("agent.send_input", {"agentId": agent["id"], "text": f"{command}; touch {output}.done"})
    wait_until(lambda: sh(cocoond, sandbox, f"test -e {output}.done")["exitCode"] == 0, timeout=20)
    return sh(cocoond, sandbox, f"cat {output}")["stdout"]


def test_the_credential_proxy_swaps_the_placeholder_for_the_real_key(
    cocoond, egress, upstream, provider, docker_client
):
    upstream.clear()
    agent = shell_agent(cocoond, egress, providers=[provider], model="standin-large")
    env = in_agent(cocoond, agent, egress, "env | grep ^ANTHROPIC_ > /tmp/env.txt", "/tmp/env.txt")
    placeholder = "cocoon_{token}_STANDIN_SECRET." + agent["id"]  # the agent's own, for its usage
    variables = dict(line.split("=", 1) for line in env.splitlines())
    assert variables["ANTHROPIC_BASE_URL"] == "http://cocoon-proxy:8080/p-standin"
    assert variables["ANTHROPIC_MODEL"] == "standin-large"
    assert variables["ANTHROPIC_API_KEY"].startswith("cocoon_")
    assert variables["ANTHROPIC_API_KEY"].endswith(placeholder.split("}")[1])

    body = in_agent(
        cocoond,
        agent,
        egress,
        'curl -sS -H "x-api-key: $ANTHROPIC_API_KEY" -H "Authorization: Bearer $ANTHROPIC_API_KEY" '
        '-H "X-Forwarded-For: 1.2.3.4" -d "{}" "$ANTHROPIC_BASE_URL/v1/messages" > /tmp/reply.txt',
        "/tmp/reply.txt",
    )
    assert body == "upstream llm.invalid /api/v1/messages"
    [request] = recorded(upstream, path="/api/v1/messages")
    headers = dict(request["headers"])
    assert headers["x-api-key"] == STANDIN_KEY
    assert headers["host"] == "llm.invalid"
    assert "authorization" not in headers
    assert "x-forwarded-for" not in headers
    assert request["port"] == 443  # TLS to the upstream, verified against the configured CA

    # The real key is nowhere in the sandbox: not in any process's env or argv, files, or the container.
    assert_secret_absent(cocoond, egress, STANDIN_KEY, docker_client)


def denied_reasons(cocoond, host: str) -> set[str]:
    return {row["reason"] for row in cocoond.call("egress.denied") if row["host"] == host}


def test_placeholders_work_only_from_their_own_sandbox_with_a_grant(
    cocoond, egress, upstream, provider, sandbox_image
):
    upstream.clear()
    mine = shell_agent(cocoond, egress, providers=[provider])
    key = in_agent(cocoond, mine, egress, "echo $ANTHROPIC_API_KEY > /tmp/key.txt", "/tmp/key.txt").strip()
    other = cocoond.call("sandbox.create", {"network": "egress", "image": sandbox_image})
    try:
        request = "curl -sS -H 'x-api-key: {key}' http://cocoon-proxy:8080/p-standin/v1/models"
        no_grant = sh(cocoond, other, request.format(key=key))["stdout"]
        assert json.loads(no_grant)["error"]["code"] == "no_grant"
        shell_agent(cocoond, other, providers=[provider])
        stolen = sh(cocoond, other, request.format(key=key))["stdout"]
        assert json.loads(stolen)["error"]["code"] == "bad_placeholder"
        forged = sh(cocoond, egress, request.format(key="cocoon_0000_STANDIN_SECRET"))["stdout"]
        assert json.loads(forged)["error"]["code"] == "bad_placeholder"
    finally:
        cocoond.post("sandbox.delete", {"sandboxId": other["id"]})
    assert recorded(upstream) == []
    # The proxy writes what it denied once a second (folded): both reasons arrive, maybe not at once.
    wait_until(lambda: {"no_grant", "bad_placeholder"} <= denied_reasons(cocoond, "p-standin"), timeout=10)


def test_server_sent_events_stream_through_the_credential_proxy(cocoond, egress, upstream, provider):
    agent = shell_agent(cocoond, egress, providers=[provider])
    lines = in_agent(
        cocoond,
        agent,
        egress,
        'curl -sSN -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/sse" '
        '| while read -r line; do [ -n "$line" ] && echo "$(date +%s.%N) $line"; done > /tmp/sse.txt',
        "/tmp/sse.txt",
    ).splitlines()
    assert len(lines) == 4
    arrived = [float(line.split()[0]) for line in lines]
    # Sent 0.5 s apart: unbuffered, they arrive spread out as well, not all at the end.
    assert arrived[-1] - arrived[0] > 1.0
    assert all(later - earlier > 0.2 for earlier, later in itertools.pairwise(arrived))


def test_providers_test_tells_good_wrong_key_and_unreachable_apart(cocoond, upstream, provider):
    good = cocoond.call("providers.test", {"providerId": provider})
    assert good["ok"]
    assert good["result"] == "ok"
    assert good["models"] == ["standin-large", "standin-small"]

    # Unsaved input: the same provider with another key, and one nobody answers.
    wrong = cocoond.call("providers.test", {"provider": STANDIN, "key": "wrong-key"})
    assert (wrong["ok"], wrong["result"], wrong["status"]) == (False, "unauthorized", 401)
    unreachable = cocoond.call(
        "providers.test", {"provider": {**STANDIN, "baseUrl": "https://127.0.0.1:9"}, "key": "x"}
    )
    assert (unreachable["ok"], unreachable["result"]) == (False, "unreachable")
    assert len({good["message"], wrong["message"], unreachable["message"]}) == 3

    german = cocoond.post(
        "providers.test", {"provider": STANDIN, "key": "wrong-key"}, headers={"x-cocoon-lang": "de"}
    ).json()["result"]
    assert german["message"] != wrong["message"]
    assert "Schlüssel" in german["message"]


def test_spawn_with_an_unknown_provider_or_a_missing_secret_is_refused(cocoond, egress):
    unknown = cocoond.post(
        "agent.spawn", {"sandboxId": egress["id"], "profile": "shell", "providers": ["nope"]}
    )
    assert unknown.json()["error"]["code"] == "invalid_params"
    assert unknown.json()["error"]["details"]["fields"][0]["path"] == "providers.0"
    cocoond.call("settings.update", {"providers": {"nokey": {**STANDIN, "secret": "NOT_SET_ANYWHERE"}}})
    missing = cocoond.post(
        "agent.spawn", {"sandboxId": egress["id"], "profile": "shell", "providers": ["nokey"]}
    )
    assert missing.json()["error"]["code"] == "invalid_params"
    assert "NOT_SET_ANYWHERE" in missing.json()["error"]["details"]["fields"][0]["message"]


def test_start_proxy_is_the_checklist_fix_for_a_stopped_proxy(cocoond, egress, docker_client):
    docker_client.containers.get(f"{cocoond.instance}-egress-proxy").stop(timeout=1)
    status = cocoond.call("egress.start_proxy")
    assert status["running"] is True
    assert status["acknowledgedVersion"] == status["policyVersion"]
    items = {item["key"]: item for item in cocoond.call("system.setup_status")["items"]}
    assert items["egressProxy"]["ok"] is True


def test_a_spent_budget_is_refused_at_the_proxy_in_the_apis_shape_until_it_is_raised(
    cocoond, egress, upstream, provider
):
    """The agent's requests are metered (the stand-in's stream reports 321 tokens in, 77 out: about
    0.0021 USD), its budget of 0.001 USD is spent after the first, and the proxy answers the next with
    Anthropic's error shape naming the budget; raised, the very next request passes."""
    agent = cocoond.call(
        "agent.spawn",
        {"sandboxId": egress["id"], "profile": "shell", "providers": [provider], "budget": {"cost": 0.001}},
    )
    cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 20})
    ask = 'curl -sS -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/quick-messages" > {out}'
    first = in_agent(cocoond, agent, egress, ask.format(out="/tmp/first.txt"), "/tmp/first.txt")
    assert "message_start" in first

    def spent() -> list[dict]:
        states = cocoond.call("usage.budgets", {"state": "exceeded"})
        return [state for state in states if state["subject"] == agent["id"]]

    [spent] = wait_until(spent, timeout=20)
    assert (spent["scope"], spent["subject"], spent["spentTokens"]) == ("agent", agent["id"], 398)

    refused = json.loads(
        in_agent(cocoond, agent, egress, ask.format(out="/tmp/second.txt"), "/tmp/second.txt")
    )
    assert refused["type"] == "error"
    assert refused["error"]["type"] == "permission_error"
    assert f"the budget of agent {agent['id']} is spent" in refused["error"]["message"]
    items = cocoond.call("attention.list", {"sandboxId": egress["id"]})
    assert [item["kind"] for item in items if item["agentId"] == agent["id"]] == ["budget"]
    # The sandbox's placeholder without the agent's name is refused too: it would count for no agent.
    unnamed = ask.replace("$ANTHROPIC_API_KEY", "${{ANTHROPIC_API_KEY%.*}}")
    dodged = json.loads(
        in_agent(cocoond, agent, egress, unnamed.format(out="/tmp/unnamed.txt"), "/tmp/unnamed.txt")
    )
    assert "is spent" in dodged["error"]["message"]

    cocoond.call("usage.set_budget", {"agentId": agent["id"], "budget": {"cost": 1}})
    again = in_agent(cocoond, agent, egress, ask.format(out="/tmp/third.txt"), "/tmp/third.txt")
    assert "message_start" in again
    cocoond.call("agent.kill", {"agentId": agent["id"]})


def test_a_projects_own_key_stands_before_the_servers_and_only_an_allowed_project_uses_the_servers(
    cocoond, egress, upstream, provider, sandbox_image, docker_client
):
    own_key = "project-own-key-" + secrets.token_hex(8)
    made = {}
    for name, server_secrets in (("own", False), ("none", False), ("allowed", True)):
        project = f"ps-{name}-{secrets.token_hex(3)}"
        cocoond.call("projects.create", {"id": project, "name": project, "serverSecrets": server_secrets})
        token = cocoond.call("tokens.create", {"name": project, "scope": "agent", "project": project})[
            "token"
        ]
        sandbox = cocoond.call("sandbox.create", {"network": "egress", "image": sandbox_image}, token=token)
        made[name] = (project, token, sandbox)
    project, token, sandbox = made["own"]
    # A project's token (no owner) neither sets nor lists its project's secrets; an admin does.
    params = {"project": project, "name": "STANDIN_SECRET", "value": own_key}
    assert cocoond.post("projects.set_secret", params, token=token).json()["error"]["code"] == "forbidden"
    cocoond.call("projects.set_secret", params)
    [listed] = cocoond.call("projects.secrets", {"project": project})
    assert listed["name"] == "STANDIN_SECRET"
    assert own_key not in json.dumps(listed)

    def key_upstream_got(name: str) -> str:
        _project, token, sandbox = made[name]
        agent = cocoond.call(
            "agent.spawn",
            {"sandboxId": sandbox["id"], "profile": "shell", "providers": [provider]},
            token=token,
        )
        cocoond.call("agent.wait", {"agentId": agent["id"], "until": ["idle"], "timeoutS": 20})
        upstream.clear()
        curl = (
            'curl -sS -H "x-api-key: $ANTHROPIC_API_KEY" -d "{}" "$ANTHROPIC_BASE_URL/v1/messages" > /tmp/r'
        )
        in_agent(cocoond, agent, sandbox, curl, "/tmp/r")
        [request] = recorded(upstream, path="/api/v1/messages")
        return dict(request["headers"])["x-api-key"]

    assert key_upstream_got("own") == own_key
    assert key_upstream_got("allowed") == STANDIN_KEY
    assert_secret_absent(cocoond, sandbox, own_key, docker_client)
    # A project with no key of its own that may not use the server's gets none: the spawn says so.
    _project, token, none_sandbox = made["none"]
    spawn = {"sandboxId": none_sandbox["id"], "profile": "shell", "providers": [provider]}
    response = cocoond.post("agent.spawn", spawn, token=token)
    assert response.json()["error"]["details"]["fields"][0]["path"] == "providers.0", response.text

    # Its own key deleted, the project (not allowed the server's) reaches the provider no more.
    cocoond.call("projects.delete_secret", {"project": project, "name": "STANDIN_SECRET"})
    response = cocoond.post("agent.spawn", spawn | {"sandboxId": sandbox["id"]}, token=made["own"][1])
    assert response.json()["error"]["code"] == "invalid_params", response.text
    for _project, _token, each in made.values():
        cocoond.post("sandbox.delete", {"sandboxId": each["id"]})
