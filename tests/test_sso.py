"""Single sign-on (OpenID Connect) end to end in Chromium, against a real OpenID provider on loopback:
django-oauth-toolkit in a process of its own (tests/oidc_idp), with discovery, the code flow with PKCE
required, RS256 ID tokens carrying a groups claim, and RP-initiated logout."""

import os
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from playwright.sync_api import Browser, Page

from tests.conftest import ROOT, Cocoond, free_port, remove_instance_objects, wait_until
from tests.security.test_revocation import manage

pytestmark = pytest.mark.e2e

USERS = "from django.contrib.auth.models import User"
GROUPS = (
    "cocoon-admins=admin,team-a=alpha:member,team-a-leads=alpha:owner,readers=alpha:viewer,b-team=beta:member"
)


class Idp:
    """The provider's process, and its users and client, set by Python run against its database."""

    def __init__(self, folder) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}/o"
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (folder / "key.pem").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.oidc_idp.settings",
            "PYTHONPATH": str(ROOT),
            "IDP_DATABASE": str(folder / "idp.sqlite3"),
            "IDP_KEY": str(folder / "key.pem"),
            "IDP_ISSUER": self.issuer,
        }
        self.django("migrate", "-v0")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=(folder / "idp.log").open("wb"),
        )
        wait_until(self.answers, timeout=60, interval=0.2)

    def answers(self) -> bool:
        try:
            return httpx.get(f"{self.issuer}/.well-known/openid-configuration").status_code == 200
        except httpx.TransportError:
            return False

    def django(self, *args: str) -> None:
        subprocess.run([sys.executable, "-m", "django", *args], env=self.env, cwd=ROOT, check=True)

    def shell(self, code: str) -> None:
        self.django("shell", "-c", code)

    def register(self, client: str, url: str) -> None:
        self.shell(
            "from oauth2_provider.models import Application as A; A.objects.create("
            f"name='cocoon', client_id='{client}', client_secret='cocoon-secret', user=None,"
            "client_type=A.CLIENT_CONFIDENTIAL, authorization_grant_type=A.GRANT_AUTHORIZATION_CODE,"
            f"redirect_uris='{url}/sso/callback', post_logout_redirect_uris='{url}/login',"
            "algorithm=A.RS256_ALGORITHM, skip_authorization=True)"
        )

    def person(self, name: str, groups: list[str]) -> None:
        """A user of the provider's (password: the name twice) in groups (only those)."""
        self.shell(
            "from django.contrib.auth.models import Group, User\n"
            f"u, _ = User.objects.get_or_create(username={name!r})\n"
            f"u.email = '{name}@example.invalid'\n"
            f"u.set_password({name * 2!r}); u.save()\n"
            f"u.groups.set([Group.objects.get_or_create(name=g)[0] for g in {groups!r}])"
        )

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def idp(tmp_path_factory) -> Iterator[Idp]:
    provider = Idp(tmp_path_factory.mktemp("idp"))
    yield provider
    provider.stop()


def _server(idp: Idp, folder, **env: str) -> Cocoond:
    """A cocoond with a client of its own at the provider."""
    instance = Cocoond(data=folder / "data")
    client = f"cocoon-{instance.port}"
    instance.env = {
        "COCOON_OIDC_ISSUER": idp.issuer,
        "COCOON_OIDC_CLIENT_ID": client,
        "COCOON_OIDC_CLIENT_SECRET": "cocoon-secret",
        "COCOON_OIDC_NAME": "Test IdP",
        "COCOON_OIDC_GROUPS": GROUPS,
        **env,
    }
    idp.register(client, instance.url)
    return instance.start()


@pytest.fixture(scope="module")
def server(idp, tmp_path_factory, docker_client) -> Iterator[Cocoond]:
    instance = _server(idp, tmp_path_factory.mktemp("sso"))
    yield instance
    instance.stop()
    remove_instance_objects(docker_client, instance.instance)


def new_page(browser: Browser) -> Page:
    page = browser.new_context(locale="en-US").new_page()
    page.set_default_timeout(20_000)
    return page


def sign_on(page: Page, server: Cocoond, name: str) -> list[str]:
    """Through the login page's button and the provider's form; the provider's authorize requests."""
    authorize: list[str] = []
    page.on("request", lambda request: "/o/authorize/" in request.url and authorize.append(request.url))
    page.goto(f"{server.url}/login")
    page.click("#sso")
    page.fill("#idp-username", name)
    page.fill("#idp-password", name * 2)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/**")
    return authorize


def roles(server: Cocoond, name: str) -> dict[str, str]:
    found = {}
    for project in server.call("projects.list"):
        for member in server.call("projects.members", {"project": project["id"]}):
            if member["user"] == name:
                found[project["id"]] = member["role"]
    return found


def test_a_person_signs_on_with_pkce_and_gets_the_projects_their_groups_grant(idp, server, browser):
    idp.person("alice", ["team-a", "team-a-leads", "unmapped"])
    page = new_page(browser)
    authorize = sign_on(page, server, "alice")
    query = parse_qs(urlsplit(authorize[0]).query)
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) >= 43
    assert query["nonce"]
    assert query["state"]
    assert urlsplit(page.url).path == "/", page.locator(".error").all_inner_texts()
    # The session acts as the person: an owner of alpha, no admin.
    assert page.locator(".who").inner_text().startswith("alice (agent, owner)")
    # The higher of two groups' roles; projects named in the mapping are made on first use.
    assert roles(server, "alice") == {"alpha": "owner"}


def test_a_changed_group_changes_the_role_at_the_next_sign_on(idp, server, browser):
    idp.person("bob", ["readers", "b-team"])
    sign_on(new_page(browser), server, "bob")
    assert roles(server, "bob") == {"alpha": "viewer", "beta": "member"}
    # A project the mapping does not name is left as its owners set it.
    server.call("projects.create", {"id": "by-hand", "name": "By hand"})
    server.call("projects.set_member", {"project": "by-hand", "user": "bob", "role": "member"})
    idp.person("bob", ["b-team"])
    sign_on(new_page(browser), server, "bob")
    assert roles(server, "bob") == {"beta": "member", "by-hand": "member"}


def test_an_admin_group_makes_a_server_admin_and_leaving_it_ends_that(idp, server, browser):
    idp.person("root-ish", ["cocoon-admins"])
    page = new_page(browser)
    sign_on(page, server, "root-ish")
    assert page.goto(f"{server.url}/settings/projects").status == 200
    idp.person("root-ish", [])
    page = new_page(browser)
    sign_on(page, server, "root-ish")
    response = page.goto(f"{server.url}/settings/projects")
    assert response is not None
    assert response.status in (403, 404)


def test_logout_ends_the_providers_session_too(idp, server, browser):
    idp.person("dora", ["team-a"])
    page = new_page(browser)
    sign_on(page, server, "dora")
    page.click("form[action='/logout'] button")  # to the provider's logout, and back
    page.wait_for_url(f"{server.url}/login**")
    # The provider asks for the password again: its session ended with ours.
    page.click("#sso")
    page.wait_for_selector("#idp-username")
    assert urlsplit(page.url).port == idp.port


def test_a_deactivated_person_is_refused_though_the_provider_vouches(idp, server, browser):
    idp.person("erin", ["team-a"])
    sign_on(new_page(browser), server, "erin")
    manage(
        server,
        f"{USERS}; User.objects.filter(username='erin').update(is_active=False)",
    )
    page = new_page(browser)
    sign_on(page, server, "erin")
    assert urlsplit(page.url).path == "/sso/callback"
    assert "erin is deactivated on this server." in page.content()
    page.goto(f"{server.url}/")
    assert urlsplit(page.url).path == "/login"


def test_a_name_made_here_otherwise_is_not_taken_over(idp, server, browser):
    manage(
        server,
        f"{USERS}; User.objects.create_user('frank', password='pw-of-franks-own')",
    )
    idp.person("frank", ["cocoon-admins"])
    page = new_page(browser)
    sign_on(page, server, "frank")
    assert "A person named frank exists on this server already" in page.content()
    manage(
        server,
        f"{USERS}; u = User.objects.get(username='frank');"
        "assert not u.is_superuser and not hasattr(u, 'sso'), u",
    )


def test_a_forged_or_replayed_callback_logs_nobody_in(server):
    client = httpx.Client(base_url=server.url, timeout=30)
    response = client.get("/sso/callback", params={"code": "guessed", "state": "forged"})
    assert response.status_code == 401
    assert "Single sign-on failed" in response.text
    assert client.get("/", follow_redirects=False).status_code == 302  # still to the login page


def post_form(client: httpx.Client, path: str, **fields: str) -> httpx.Response:
    return client.post(path, data={**fields, "csrfmiddlewaretoken": client.cookies["csrftoken"]})


def test_password_login_can_be_turned_off(idp, tmp_path_factory, docker_client):
    instance = _server(idp, tmp_path_factory.mktemp("nopassword"), COCOON_PASSWORD_LOGIN="0")
    try:
        manage(
            instance,
            f"{USERS}; User.objects.create_superuser('gus', password='gus-pw')",
        )
        client = httpx.Client(base_url=instance.url, timeout=30)
        page = client.get("/login")
        assert 'name="password"' not in page.text
        assert "Sign on with Test IdP" in page.text
        refused = post_form(client, "/login", username="gus", password="gus-pw")
        assert refused.status_code == 403
        assert "Password login is off" in refused.text
        client.get("/admin/login/")
        admin = post_form(client, "/admin/login/", username="gus", password="gus-pw")
        assert admin.status_code == 200  # the form again, with its error: no session
        assert client.get("/admin/", follow_redirects=False).status_code == 302
        # A token still logs in.
        token = post_form(client, "/login", token=instance.token)
        assert token.status_code == 302
    finally:
        instance.stop()
        remove_instance_objects(docker_client, instance.instance)
