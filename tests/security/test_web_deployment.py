"""Web deployment behind the TLS reverse proxy: host names, forwarded headers, lock-out, CSP.

The attacker is anyone on the network who can reach the web UI or the API: a page that rebinds its DNS
name to cocoond, a client forging X-Forwarded-* headers, a guesser trying tokens and passwords.
Two live cocoonds: one deployed as behind Caddy (COCOON_URL, the proxy on 127.0.0.1 trusted) and one
with today's local defaults. Both run the real default failure limit.
"""

import json
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from http.cookies import SimpleCookie
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.conftest import Cocoond, remove_instance_objects

pytestmark = pytest.mark.e2e

PUBLIC_HOST = "cocoon.example.invalid"
PUBLIC_URL = f"https://{PUBLIC_HOST}"
LIMIT = 20  # the default COCOON_AUTH_FAILURE_LIMIT: 20 in 5 minutes
# The test settings raise them for the other suites.
REAL_DEFAULTS = {"COCOON_AUTH_FAILURE_LIMIT": "", "COCOON_AUTH_USER_FAILURE_LIMIT": ""}
UNTRUSTED_PEER = "127.0.0.3"  # loopback too, but not in COCOON_TRUSTED_PROXIES


def _started(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any, env: dict[str, str]
) -> Iterator[Cocoond]:
    instance = Cocoond(data=tmp_path_factory.mktemp("web") / "data", env=REAL_DEFAULTS | env).start()
    try:
        yield instance
    finally:
        instance.stop()
        remove_instance_objects(docker_client, instance.instance)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, docker_client) -> Iterator[Cocoond]:
    yield from _started(
        tmp_path_factory, docker_client, {"COCOON_URL": PUBLIC_URL, "COCOON_TRUSTED_PROXIES": "127.0.0.1"}
    )


@pytest.fixture(scope="module")
def local(tmp_path_factory, docker_client) -> Iterator[Cocoond]:
    yield from _started(tmp_path_factory, docker_client, {})


def via_proxy(client: str, proto: str = "https") -> dict[str, str]:
    """What Caddy sends for a visitor at client; the leftmost entry is the visitor's own forgery."""
    return {"Host": PUBLIC_HOST, "X-Forwarded-Proto": proto, "X-Forwarded-For": f"10.9.9.9, {client}"}


def set_cookies(response: httpx.Response) -> SimpleCookie:
    cookies = SimpleCookie()
    for header in response.headers.get_list("set-cookie"):
        cookies.load(header)
    return cookies


class LoginForm:
    """The web UI's login form, with its CSRF cookie, posted through the given headers."""

    def __init__(self, server: Cocoond, headers: dict[str, str], http: httpx.Client | None = None) -> None:
        self.server, self.headers, self.http = server, headers, http or httpx.Client(timeout=30)
        self.page = self.http.get(f"{server.url}/login", headers=headers)
        assert self.page.status_code == 200, self.page.text
        self.csrf = set_cookies(self.page)["csrftoken"].value

    def post(self, **form: str) -> httpx.Response:
        origin = f"https://{self.headers['Host']}" if "Host" in self.headers else self.server.url
        return self.http.post(
            f"{self.server.url}/login",
            data=form | {"csrfmiddlewaretoken": self.csrf},
            headers=self.headers | {"Cookie": f"csrftoken={self.csrf}", "Origin": origin},
        )


def ws_frames(server: Cocoond, token: str, headers: dict[str, str]) -> tuple[list[dict], int | None]:
    """The frames a WebSocket connect with this token gets, and the close code it ends with."""
    frames = []
    with connect(
        server.ws_url, additional_headers=headers | {"Authorization": f"Bearer {token}"}, open_timeout=10
    ) as ws:
        try:
            while True:
                frames.append(json.loads(ws.recv(timeout=10)))
        except ConnectionClosed as closed:
            return frames, closed.rcvd.code if closed.rcvd else None


def mcp_post(server: Cocoond, token: str, headers: dict[str, str]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    return httpx.post(
        f"{server.url}/mcp",
        json=body,
        headers=headers
        | {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
        timeout=30,
    )


# -- secure cookies and the forwarded scheme ------------------------------------------------------------


def test_a_login_through_the_tls_proxy_sets_secure_cookies(deployed):
    form = LoginForm(deployed, via_proxy("203.0.113.1"))
    assert "Secure" in form.page.headers["set-cookie"]
    # The proxy said https, so the browser is told to keep to it.
    assert form.page.headers["strict-transport-security"].startswith("max-age=")

    response = form.post(token=deployed.token)

    assert response.status_code == 302, response.text
    session = set_cookies(response)["sessionid"]
    assert session["secure"]
    assert session["httponly"]


def test_a_forwarded_scheme_and_client_from_an_untrusted_peer_are_ignored(deployed):
    forged = httpx.Client(transport=httpx.HTTPTransport(local_address=UNTRUSTED_PEER), timeout=30)
    page = forged.get(f"{deployed.url}/login", headers=via_proxy("203.0.113.2"))
    assert page.status_code == 200
    assert "strict-transport-security" not in page.headers  # not taken for a TLS request

    # Each guess claims another client address; all of them count against the real peer.
    for attempt in range(LIMIT):
        response = forged.post(
            f"{deployed.url}/v1/rpc/system.info",
            headers=via_proxy(f"203.0.113.{100 + attempt}") | {"Authorization": "Bearer cct_guess"},
        )
        assert response.status_code == 401
    locked = forged.post(
        f"{deployed.url}/v1/rpc/system.info",
        headers=via_proxy("203.0.113.250") | {"Authorization": "Bearer cct_guess"},
    )
    assert locked.status_code == 429
    # Only wrong tokens are slowed down (#38): the right one still passes from that peer.
    right = forged.post(
        f"{deployed.url}/v1/rpc/system.info",
        headers=via_proxy("203.0.113.251") | {"Authorization": f"Bearer {deployed.token}"},
    )
    assert right.status_code == 200


def test_without_trusted_proxies_nobody_can_claim_another_address(local):
    # From an address of its own, so the other tests' 127.0.0.1 is not locked out.
    guesser = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.4"), timeout=30)
    for attempt in range(LIMIT):
        headers = {"X-Forwarded-For": f"198.51.100.{attempt}", "Authorization": "Bearer cct_guess"}
        assert guesser.post(f"{local.url}/v1/rpc/system.info", headers=headers).status_code == 401
    headers = {"X-Forwarded-For": "198.51.100.200", "Authorization": "Bearer cct_guess"}
    assert guesser.post(f"{local.url}/v1/rpc/system.info", headers=headers).status_code == 429
    headers = {"X-Forwarded-For": "198.51.100.201", "Authorization": f"Bearer {local.token}"}
    assert guesser.post(f"{local.url}/v1/rpc/system.info", headers=headers).status_code == 200


# -- host names (DNS rebinding) ---------------------------------------------------------------------------


def ws_with_host(server: Cocoond, host: str, token: str) -> dict[str, Any]:
    """A WebSocket to cocoond's port that names another host, as a rebinding page's would."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    with connect(
        f"ws://{host}:{server.port}/v1/ws",
        sock=sock,
        additional_headers={"Authorization": f"Bearer {token}"},
        open_timeout=10,
    ) as ws:
        ws.send(json.dumps({"id": 1, "method": "system.info", "params": {}}))
        return json.loads(ws.recv(timeout=10))


@pytest.mark.parametrize("which", ["deployed", "local"])
def test_it_refuses_a_host_name_that_is_not_its_own(request, which):
    server = request.getfixturevalue(which)
    evil = {"Host": "evil.invalid"}
    auth = {"Authorization": f"Bearer {server.token}"}

    assert httpx.get(f"{server.url}/login", headers=evil).status_code == 400
    assert httpx.get(f"{server.url}/static/ui/app.js", headers=evil).status_code == 400
    refused = httpx.post(f"{server.url}/v1/rpc/system.info", headers=evil | auth)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_request"
    assert mcp_post(server, server.token, evil).status_code == 400
    with pytest.raises(InvalidStatus):
        ws_with_host(server, "evil.invalid", server.token)

    # its own names still work: the loopback name the CLI and tests use, and the public one
    assert httpx.post(f"{server.url}/v1/rpc/system.info", headers=auth).status_code == 200
    assert "result" in ws_with_host(server, "localhost", server.token)
    public = httpx.post(f"{server.url}/v1/rpc/system.info", headers={"Host": PUBLIC_HOST} | auth)
    assert public.status_code == (200 if which == "deployed" else 400)


# -- lock-out of guessers -----------------------------------------------------------------------------------


def ws_call(server: Cocoond, token: str, headers: dict[str, str]) -> tuple[dict, int | None]:
    """The first frame a WebSocket connect with this token gets after asking for system.info, and its
    close code if it was closed (None: still open)."""
    with connect(
        server.ws_url, additional_headers=headers | {"Authorization": f"Bearer {token}"}, open_timeout=10
    ) as ws:
        ws.send(json.dumps({"id": 1, "method": "system.info", "params": {}}))
        try:
            return json.loads(ws.recv(timeout=10)), None
        except ConnectionClosed as closed:
            return {}, closed.rcvd.code if closed.rcvd else None


def terminal_close_code(server: Cocoond, token: str, headers: dict[str, str]) -> int | None:
    """How the terminal URL of an agent that does not exist closes for this token: 4404 once the token
    passed, 4401/4429 if it did not."""
    url = f"{server.ws_url.removesuffix('/v1/ws')}/v1/agents/ag_nosuchagent/attach"
    authorization = {"Authorization": f"Bearer {token}"}
    with connect(url, additional_headers=headers | authorization, open_timeout=10) as ws:
        try:
            while True:
                ws.recv(timeout=10)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None


def test_fifty_wrong_tokens_slow_down_wrong_tokens_only_and_the_right_one_passes_everywhere(deployed):
    guesser = via_proxy("203.0.113.66")
    forwarded = {"X-Forwarded-For": "203.0.113.66"}
    form = LoginForm(deployed, guesser)
    # One counter of wrong tokens for every way in: the login form, HTTP RPC, WebSocket, /mcp.
    answers = []
    for attempt in range(50):
        way = attempt % 4
        if way == 0:
            answers.append(form.post(token="cct_guess").status_code)
        elif way == 1:
            response = httpx.post(
                f"{deployed.url}/v1/rpc/system.info", headers=guesser | {"Authorization": "Bearer cct_guess"}
            )
            answers.append(response.status_code)
        elif way == 2:
            frames, code = ws_frames(deployed, "cct_guess", forwarded)
            answers.append({4401: 401, 4429: 429}[code])
        else:
            answers.append(mcp_post(deployed, "cct_guess", guesser).status_code)
    assert answers == [401] * LIMIT + [429] * (50 - LIMIT)

    # Wrong tokens from that address are slowed down, on every path ...
    api = httpx.post(
        f"{deployed.url}/v1/rpc/system.info",
        headers=guesser | {"Authorization": "Bearer cct_guess", "x-cocoon-lang": "de"},
    )
    assert api.status_code == 429
    assert 0 < int(api.headers["retry-after"]) <= 300
    error = api.json()["error"]
    assert error["code"] == "rate_limited"
    assert error["details"]["retryAfterS"] > 0
    assert "Zu viele" in error["message"]
    frames, code = ws_frames(deployed, "cct_guess", forwarded)
    assert frames[0]["error"]["code"] == "rate_limited"
    assert code == 4429
    assert terminal_close_code(deployed, "cct_guess", forwarded) == 4429

    # ... while the right token from the same address works on every one of them.
    assert form.post(token=deployed.token).status_code == 302
    right = httpx.post(
        f"{deployed.url}/v1/rpc/system.info", headers=guesser | {"Authorization": f"Bearer {deployed.token}"}
    )
    assert right.status_code == 200, right.text
    assert "version" in right.json()["result"]
    frame, closed = ws_call(deployed, deployed.token, forwarded)
    assert closed is None
    assert frame["id"] == 1
    assert "result" in frame, frame
    listed = mcp_post(deployed, deployed.token, guesser)
    assert listed.status_code == 200, listed.text
    assert "tools" in listed.text
    assert terminal_close_code(deployed, deployed.token, forwarded) == 4404  # past auth: no such agent


def test_a_revoked_token_says_so_on_every_transport_and_is_not_counted_as_guessing(deployed):
    created = deployed.call(
        "tokens.create", {"name": "stale-cron-job", "scope": "agent", "expiresInDays": 30}
    )
    assert created["expiresAt"] is not None
    deployed.call("tokens.revoke", {"tokenId": created["id"]})
    client = via_proxy("203.0.113.70")
    forwarded = {"X-Forwarded-For": "203.0.113.70"}
    for _ in range(LIMIT + 5):  # past the limit: a revoked token is no guess
        response = httpx.post(
            f"{deployed.url}/v1/rpc/system.info",
            headers=client | {"Authorization": f"Bearer {created['token']}", "x-cocoon-lang": "de"},
        )
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["code"] == "token_revoked"
        assert error["details"]["tokenId"] == created["id"]
        assert "widerrufen" in error["message"]
    frames, code = ws_frames(deployed, created["token"], forwarded)
    assert frames[0]["error"]["code"] == "token_revoked"
    assert code == 4401
    refused = mcp_post(deployed, created["token"], client)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "token_revoked"
    assert terminal_close_code(deployed, created["token"], forwarded) == 4401
    page = LoginForm(deployed, client).post(token=created["token"])
    assert page.status_code == 401
    assert "revoked" in page.text


def test_the_lock_out_is_shared_by_cocoond_processes_on_redis(start_cocoond, redis_url):
    env = {"REDIS_URL": redis_url, "COCOON_AUTH_FAILURE_LIMIT": "3/5 minutes"}
    first, second = start_cocoond(env), start_cocoond(env)
    for _ in range(3):
        assert first.post("system.info", token="cct_guess").status_code == 401
    assert second.post("system.info", token="cct_guess").status_code == 429
    assert second.post("system.info", token=second.token).status_code == 200


# -- content security policy ---------------------------------------------------------------------------


def test_ui_pages_carry_a_content_security_policy_without_inline_scripts(local):
    form = LoginForm(local, {})
    assert form.post(token=local.token).status_code == 302
    dashboard = form.http.get(f"{local.url}/")
    assert dashboard.status_code == 200
    assert "Setup checklist" in dashboard.text
    for page in (form.page, dashboard):
        policy = dict(
            directive.strip().split(" ", 1)
            for directive in page.headers["content-security-policy"].split(";")
        )
        assert policy["script-src"] == "'self'"
        assert policy["frame-ancestors"] == "'none'"
        assert policy["object-src"] == "'none'"
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "same-origin"


# -- in-process: Django's own password form, and whom failures count against ----------------------------


@pytest.fixture
def strict_limit(settings) -> Iterator[None]:
    """A fresh failure store with a small limit; the suite's own one comes back afterwards."""
    from cocoon import throttle

    settings.COCOON_AUTH_FAILURE_LIMIT = "3/5 minutes"
    throttle._limiter.cache_clear()
    yield
    throttle._limiter.cache_clear()


@pytest.mark.django_db
@pytest.mark.usefixtures("strict_limit")
@pytest.mark.parametrize("path", ["/admin/login/", "/login"])
def test_wrong_passwords_lock_that_user_at_that_address_and_no_one_else(path):
    from django.contrib.auth import get_user_model
    from django.test import Client

    users = get_user_model().objects
    users.create_superuser("root", password="right-password")
    users.create_superuser("bea", password="bea-password")
    guesser = Client(REMOTE_ADDR="192.0.2.9")
    for _ in range(50):
        guesser.post(path, {"username": "root", "password": "guess"})
    assert "_auth_user_id" not in guesser.session
    # root's right password is refused from there until the window ends ...
    refused = guesser.post(path, {"username": "root", "password": "right-password"})
    assert "_auth_user_id" not in guesser.session
    if path == "/login":
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) > 0
    # ... another user's right password from the same address still logs in ...
    colleague = Client(REMOTE_ADDR="192.0.2.9")
    assert colleague.post(path, {"username": "bea", "password": "bea-password"}).status_code == 302
    # ... and so does root's from another address.
    other = Client(REMOTE_ADDR="192.0.2.10")
    assert other.post(path, {"username": "root", "password": "right-password"}).status_code == 302


@pytest.mark.django_db
def test_a_user_name_is_locked_across_addresses_by_the_slower_limit(settings):
    from django.contrib.auth import get_user_model
    from django.test import Client

    from cocoon import throttle

    settings.COCOON_AUTH_USER_FAILURE_LIMIT = "5/hour"
    settings.COCOON_AUTH_FAILURE_LIMIT = "3/5 minutes"
    throttle._limiter.cache_clear()
    try:
        get_user_model().objects.create_superuser("root", password="right-password")
        for address in ("192.0.2.21", "192.0.2.22", "192.0.2.23", "192.0.2.24", "192.0.2.25"):
            Client(REMOTE_ADDR=address).post("/login", {"username": "root", "password": "guess"})
        fresh = Client(REMOTE_ADDR="192.0.2.26")
        assert fresh.post("/login", {"username": "root", "password": "right-password"}).status_code == 429
    finally:
        throttle._limiter.cache_clear()


@pytest.mark.django_db(transaction=True)
def test_an_expired_token_answers_token_expired_and_its_cache_entry_does_not_outlive_it():
    from cocoon import tokens
    from cocoon.auth import token_actor
    from cocoon.errors import TokenExpired

    token, plain = tokens.create_token("nightly", "agent", expires_in=timedelta(seconds=2))
    assert token_actor(plain, "192.0.2.40").token_id == token.id  # remembered by tokencache now
    time.sleep(2.2)
    with pytest.raises(TokenExpired) as expired:
        token_actor(plain, "192.0.2.40")
    assert expired.value.details["tokenId"] == token.id
    assert expired.value.render()["code"] == "token_expired"


def test_an_ipv6_client_counts_as_its_whole_slash_64():
    from cocoon.throttle import bucket

    assert bucket("2001:db8:1:2::1") == bucket("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert bucket("2001:db8:1:3::1") != bucket("2001:db8:1:2::1")
    assert bucket("::ffff:192.0.2.1") == bucket("192.0.2.1") == "192.0.2.1"
