"""The web UI through Django's test client: login, sessions, authorization, CSRF, i18n, forms."""

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from cocoon import system, tokens
from cocoon.choices import TokenScope
from cocoon.models import Project, Secret
from server.asgi import application
from ui.diff import parse_patch

# Pages ask the engine (the setup checklist makes the instance's networks and volume): docker_client
# removes what this test instance made when the session ends.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("docker_client")]

ADMIN_PAGES = [
    "/settings/",
    "/settings/secrets",
    "/settings/tokens",
    "/settings/projects",
    "/settings/providers",
    "/settings/egress",
    "/settings/usage",
    "/settings/nodes",
]


def logged_in(scope: str = TokenScope.ADMIN, **client_options) -> tuple[Client, str]:
    _token, plain = tokens.create_token(f"ui-{scope}", scope)
    client = Client(**client_options)
    response = client.post("/login", {"token": plain})
    assert response.status_code == 302, response.content
    return client, plain


def test_it_sends_a_visitor_without_a_session_to_the_login_form():
    response = Client().get("/sandboxes/")
    assert response.status_code == 302
    assert response["Location"] == "/login?next=%2Fsandboxes%2F"


def test_it_logs_in_with_the_admin_token_and_shows_the_checklist():
    client, _plain = logged_in()
    page = client.get("/").content.decode()
    assert "Setup checklist" in page
    assert 'data-check="image"' in page
    assert "ui-admin" in page
    # the token itself is never stored in the session
    assert all(_plain not in str(value) for value in client.session.values())


def test_it_rejects_a_wrong_token_with_a_message():
    response = Client().post("/login", {"token": "cct_wrong"})
    assert response.status_code == 401
    assert "not valid" in response.content.decode()


def test_it_returns_to_the_page_asked_for_but_never_to_another_site():
    _token, plain = tokens.create_token("next", TokenScope.ADMIN)
    assert Client().post("/login", {"token": plain, "next": "/activity/"})["Location"] == "/activity/"
    assert Client().post("/login", {"token": plain, "next": "https://evil.example/"})["Location"] == "/"


@pytest.mark.parametrize("path", ADMIN_PAGES)
def test_an_agent_token_gets_a_403_page_on_admin_pages(path):
    client, _plain = logged_in(TokenScope.AGENT)
    response = client.get(path)
    assert response.status_code == 403
    body = response.content.decode()
    assert "<h1>Not allowed</h1>" in body
    assert "Traceback" not in body


def test_an_agent_token_cannot_post_admin_actions_either():
    client, _plain = logged_in(TokenScope.AGENT)
    response = client.post("/settings/tokens", {"name": "sneaky", "scope": "admin"})
    assert response.status_code == 403
    assert not tokens.ApiToken.objects.filter(name="sneaky").exists()
    assert "Settings" not in client.get("/activity/").content.decode()  # no link to what it cannot open


def test_forms_need_the_csrf_token():
    _token, plain = tokens.create_token("csrf", TokenScope.ADMIN)
    client = Client(enforce_csrf_checks=True)
    assert client.post("/login", {"token": plain}).status_code == 403
    token = str(client.get("/login").context["csrf_token"])
    assert client.post("/login", {"token": plain, "csrfmiddlewaretoken": token}).status_code == 302
    response = client.post("/settings/secrets", {"name": "X", "value": "y"})
    assert response.status_code == 403
    assert not Secret.objects.exists()
    token = client.get("/settings/secrets").context["csrf_token"]
    response = client.post(
        "/settings/secrets", {"name": "X", "value": "y", "csrfmiddlewaretoken": str(token)}
    )
    assert response.status_code == 302
    assert Secret.objects.filter(name="X").exists()


def test_revoking_the_token_ends_its_sessions():
    client, _plain = logged_in()
    token_id = client.session[next(iter(client.session.keys()))]["token"]
    tokens.ApiToken.objects.filter(pk=token_id).delete()
    assert client.get("/")["Location"].startswith("/login")


def test_logout_ends_the_session():
    client, _plain = logged_in()
    assert client.post("/logout").status_code == 302
    assert client.get("/").status_code == 302


def test_a_django_superuser_logs_in_as_admin_and_a_plain_user_as_agent():
    user_model = get_user_model()
    user_model.objects.create_superuser("root", password="pw-root")
    user_model.objects.create_user("plain", password="pw-plain")
    root = Client()
    assert root.post("/login", {"username": "root", "password": "pw-root"}).status_code == 302
    assert root.get("/settings/tokens").status_code == 200
    plain = Client()
    assert plain.post("/login", {"username": "plain", "password": "pw-plain"}).status_code == 302
    assert plain.get("/settings/tokens").status_code == 403
    assert Client().post("/login", {"username": "root", "password": "wrong"}).status_code == 401


def test_a_changed_password_ends_the_users_ui_sessions():
    user = get_user_model().objects.create_superuser("root", password="pw-root")
    browser = Client()
    browser.post("/login", {"username": "root", "password": "pw-root"})
    assert browser.get("/settings/tokens").status_code == 200
    user.set_password("pw-new")
    user.save()
    assert browser.get("/settings/tokens").status_code == 302  # back to the login page


def test_a_created_token_is_shown_once_and_secrets_never():
    client, _plain = logged_in()
    page = client.post("/settings/tokens", {"name": "ci", "scope": "agent"}).content.decode()
    created = tokens.ApiToken.objects.get(name="ci")
    assert "never shown again" in page
    plain = page.split('id="created-token">')[1].split("<")[0]
    assert tokens.authenticate(plain).token_id == created.id
    assert plain not in client.get("/settings/tokens").content.decode()
    client.post("/settings/secrets", {"name": "API_KEY", "value": "s3cret-value"})
    assert "s3cret-value" not in client.get("/settings/secrets").content.decode()


def test_projects_are_made_with_quotas_and_their_agent_tokens_from_the_settings_pages():
    client, _plain = logged_in()
    form = {"id": "team-a", "name": "Team A", "sandboxes": "3", "cpus": "2.5", "memoryMb": "", "agents": ""}
    response = client.post("/settings/projects", form, follow=True)
    assert "Project team-a created." in response.content.decode()
    assert Project.objects.get(pk="team-a").quotas == {"sandboxes": 3, "cpus": 2.5}
    # A quota that is no number is refused at its field, and nothing changes.
    response = client.post("/settings/projects", {"update": "team-a", "team-a-agents": "many"}, follow=True)
    assert "agents" in response.content.decode()
    assert Project.objects.get(pk="team-a").quotas == {"sandboxes": 3, "cpus": 2.5}
    client.post("/settings/projects", {"update": "team-a", "team-a-agents": "4"})
    assert Project.objects.get(pk="team-a").quotas == {"agents": 4}  # the whole set: blank is no limit
    page = client.post(
        "/settings/tokens", {"name": "team-a-ci", "scope": "agent", "project": "team-a", "sandboxes": "own"}
    ).content.decode()
    plain = page.split('id="created-token">')[1].split("<")[0]
    actor = tokens.authenticate(plain)
    assert (actor.project, actor.own_only) == ("team-a", True)
    assert "its own sandboxes only" in client.get("/settings/tokens").content.decode()


def test_a_projects_owner_keeps_its_own_secrets_and_an_admin_lets_it_use_the_servers():
    from cocoon import vault
    from cocoon.models import Membership, ProjectSecret

    admin, _plain = logged_in()
    admin.post("/settings/projects", {"id": "team-s", "name": "Team S"})
    assert Project.objects.get(pk="team-s").server_secrets is False  # a new project: only an admin lets it
    admin.post("/settings/projects", {"update": "team-s", "team-s-serverSecrets": "1"})
    assert Project.objects.get(pk="team-s").server_secrets is True
    owner = get_user_model().objects.create_user("owner-s", password="pw-owner-s")
    member = get_user_model().objects.create_user("member-s", password="pw-member-s")
    Membership.objects.create(project_id="team-s", user=owner, role="owner")
    Membership.objects.create(project_id="team-s", user=member, role="member")
    admin.post(
        "/projects/team-s/members", {"user": "member-s", "role": "member", "sandboxes": "2", "cpus": ""}
    )
    assert Membership.objects.get(project_id="team-s", user=member).quotas == {"sandboxes": 2}
    client = Client()
    client.post("/login", {"username": "owner-s", "password": "pw-owner-s"})
    response = client.post(
        "/projects/team-s/members", {"name": "GITHUB_TOKEN", "value": "ghp-team-s"}, follow=True
    )
    assert "Secret GITHUB_TOKEN saved." in response.content.decode()
    assert "ghp-team-s" not in response.content.decode()
    assert vault.read_secret("GITHUB_TOKEN", "team-s") == "ghp-team-s"
    assert vault.read_secret("GITHUB_TOKEN") is None  # the server's is another
    # A member neither sees nor sets them.
    client = Client()
    client = Client()
    client.post("/login", {"username": "member-s", "password": "pw-member-s"})
    assert "GITHUB_TOKEN" not in client.get("/projects/team-s/members").content.decode()
    client.post("/projects/team-s/members", {"name": "GITHUB_TOKEN", "value": "taken-over"})
    assert vault.read_secret("GITHUB_TOKEN", "team-s") == "ghp-team-s"
    client = Client()
    client.post("/login", {"username": "owner-s", "password": "pw-owner-s"})
    client.post("/projects/team-s/members", {"name": "GITHUB_TOKEN", "delete": "1"})
    assert not ProjectSecret.objects.filter(project_id="team-s").exists()


def test_a_projects_owner_makes_and_revokes_its_own_tokens_and_nobody_else_does():
    """Issue #30: owners make their project's agent tokens (a CI job's, a bot's): shown once, acting in
    that project alone; members, the project's own tokens and another project's owners make none, and a
    project revokes only its own."""
    import re

    from cocoon.auth import user_actor
    from cocoon.errors import Forbidden, NotFound
    from cocoon.models import ApiToken, Membership, RevokedToken
    from cocoon.registry import registry

    for project in ("team-t", "team-u"):
        Project.objects.create(id=project, name=project)
    owner = get_user_model().objects.create_user("owner-t", password="pw-owner-t")
    member = get_user_model().objects.create_user("member-t", password="pw-member-t")
    Membership.objects.create(project_id="team-t", user=owner, role="owner")
    Membership.objects.create(project_id="team-t", user=member, role="member")
    client = Client()
    client.post("/login", {"username": "owner-t", "password": "pw-owner-t"})
    page = client.post(
        "/projects/team-t/members", {"tokenName": "ci", "ownSandboxes": "1", "expiresInDays": "30"}
    ).content.decode()
    plain = re.search(r'<code id="created-token">([^<]+)</code>', page).group(1)
    made = tokens.authenticate(plain)
    assert (made.project, made.own_only, made.scope, made.role) == ("team-t", True, "agent", "")
    listed = client.get("/projects/team-t/members").content.decode()
    assert f'data-token="{made.token_id}"' in listed
    assert plain not in listed  # shown that once only

    def dispatch(method: str, params: dict, actor) -> dict:
        return registry.dispatch(method, params, actor, "en")

    count = ApiToken.objects.count()
    with pytest.raises(NotFound):  # another project's: not even seen
        dispatch("projects.create_token", {"project": "team-u", "name": "x"}, user_actor(owner, "team-t"))
    with pytest.raises(Forbidden):
        dispatch("projects.create_token", {"project": "team-t", "name": "x"}, user_actor(member, "team-t"))
    with pytest.raises(Forbidden):  # a token of the project (a steering agent's, a bot's) makes no token
        dispatch("projects.create_token", {"project": "team-t", "name": "x"}, made)
    assert ApiToken.objects.count() == count
    other, _other_plain = tokens.create_token("other", TokenScope.AGENT, project="team-u")
    client.post("/projects/team-t/members", {"revokeToken": other.id})
    assert ApiToken.objects.filter(pk=other.pk).exists()  # not the project's: not found
    revoked = client.post("/projects/team-t/members", {"revokeToken": made.token_id}, follow=True)
    assert "Token revoked." in revoked.content.decode()
    # (The token cache forgets it once the revocation commits; this test's transaction never does.)
    assert not ApiToken.objects.filter(pk=made.token_id).exists()
    assert RevokedToken.objects.filter(token_id=made.token_id).exists()


def test_an_invitation_link_makes_a_member_once_and_then_opens_nothing():
    from datetime import timedelta

    from cocoon.models import Invite, Membership

    admin, _plain = logged_in()
    admin.post("/settings/projects", {"id": "team-i", "name": "Team I"})
    page = admin.post("/projects/team-i/members", {"invite": "member"}).content.decode()
    link = page.split('id="invite-link">')[1].split("<")[0]
    path = link.removeprefix(system.public_url())
    assert path.startswith("/join/")
    assert link not in admin.get("/projects/team-i/members").content.decode()  # shown once
    # Someone without an account signs up through it and works in the project as a member.
    newcomer = Client()
    assert "Team I" in newcomer.get(path).content.decode()
    form = {"username": "newcomer", "password1": "a-long-pass-phrase-9", "password2": "a-long-pass-phrase-9"}
    assert newcomer.post(path, form).status_code == 302
    assert Membership.objects.get(project_id="team-i", user__username="newcomer").role == "member"
    assert "Members of team-i" in newcomer.get("/projects/team-i/members").content.decode()
    # Once used, the link opens nothing: no second account, no second join.
    other = Client()
    assert other.get(path).status_code == 403
    form = {"username": "second", "password1": "a-long-pass-phrase-9", "password2": "a-long-pass-phrase-9"}
    assert other.post(path, form).status_code == 403
    assert not get_user_model().objects.filter(username="second").exists()
    # A person logged in joins with a click and keeps a higher role; an expired link opens nothing.
    owner = get_user_model().objects.create_user("owner-i", password="pw-owner-i")
    Membership.objects.create(project_id="team-i", user=owner, role="owner")
    page = admin.post("/projects/team-i/members", {"invite": "viewer"}).content.decode()
    path = page.split('id="invite-link">')[1].split("<")[0].removeprefix(system.public_url())
    person = Client()
    person.post("/login", {"username": "owner-i", "password": "pw-owner-i"})
    assert "Join as owner-i" in person.get(path).content.decode()
    assert person.post(path).status_code == 302
    assert Membership.objects.get(project_id="team-i", user=owner).role == "owner"
    page = admin.post("/projects/team-i/members", {"invite": "member"}).content.decode()
    path = page.split('id="invite-link">')[1].split("<")[0].removeprefix(system.public_url())
    Invite.objects.filter(used_at__isnull=True).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get(path).status_code == 403
    assert Client().get("/join/made-up").status_code == 403
    # Only owners and admins make links.
    member = Client()
    member.post("/login", {"username": "newcomer", "password": "a-long-pass-phrase-9"})
    member.post("/projects/team-i/members", {"invite": "owner"})
    assert Invite.objects.filter(created_by__startswith="newcomer").count() == 0


def test_the_django_admin_is_for_server_admins_only_not_staff_with_permissions():
    from django.contrib.auth.models import Permission

    staff = get_user_model().objects.create_user("staff", password="pw-staff", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client = Client()
    client.login(username="staff", password="pw-staff")
    assert client.get("/admin/sandboxes/sandbox/").status_code == 302  # to the admin's login
    get_user_model().objects.create_superuser("root", password="pw-root")
    client.login(username="root", password="pw-root")
    assert client.get("/admin/sandboxes/sandbox/").status_code == 200


def test_the_django_admin_accepts_the_uis_token_login_while_the_token_lives():
    """Issue #37: /admin/ takes the same login as the UI; an admin token's session enters as the token's
    stand-in, which no password opens, and no longer once the token is revoked; an agent token's never."""
    client, plain = logged_in()
    assert client.get("/admin/sandboxes/sandbox/").status_code == 200
    assert client.get("/admin/login/").status_code == 302  # logged in already: on to the index
    [stand_in] = get_user_model().objects.filter(username__startswith="token:")
    assert (stand_in.is_superuser, stand_in.has_usable_password()) == (True, False)
    token = tokens.authenticate(plain)
    tokens.create_token("another admin", TokenScope.ADMIN)  # the last admin token cannot be revoked
    tokens.revoke_token(token.token_id, actor=token)
    assert client.get("/admin/sandboxes/sandbox/").status_code == 302  # to the admin's login
    agent_client, _agent_plain = logged_in(TokenScope.AGENT)
    assert agent_client.get("/admin/sandboxes/sandbox/").status_code == 302
    assert get_user_model().objects.filter(username__startswith="token:").count() == 1


def test_settings_form_saves_and_shows_field_errors_in_place():
    client, _plain = logged_in()
    page = client.get("/settings/")
    form = {row[0].name: row[1] for row in page.context["rows"] if row[0].kind != "bool"}
    form["general__activityRetentionDays"] = "30"
    assert client.post("/settings/", form).status_code == 302
    assert client.get("/settings/").context["rows"][1][1] == 30
    form["sandbox__limits__cpus"] = "999"
    response = client.post("/settings/", form)
    assert response.status_code == 400
    assert "Must be at most" in response.content.decode()


def test_pages_of_methods_this_server_lacks_are_hidden_or_not_found():
    from cocoon.registry import registry

    client, _plain = logged_in()
    if registry.find("task.list") is None and registry.find("schedule.list") is None:
        assert 'href="/tasks/"' not in client.get("/").content.decode()
        assert client.get("/tasks/").status_code == 404
    if registry.find("egress.denied") is None:
        assert "data-denied-list" not in client.get("/settings/egress").content.decode()


def test_it_speaks_the_browsers_language_and_the_switch_wins():
    client, _plain = logged_in()
    german = client.get("/", HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9").content.decode()
    assert "Einrichtung" in german
    assert 'lang="de"' in german
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    english = client.get("/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "Setup checklist" in english
    assert "Anmelden" in Client().get("/login", HTTP_ACCEPT_LANGUAGE="de").content.decode()


def test_a_language_chosen_with_lang_lasts_for_the_next_pages():
    """Issue #37: ?lang=de held for one page only."""
    client, _plain = logged_in()
    assert 'lang="de"' in client.get("/?lang=de").content.decode()
    assert client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "de"
    assert 'lang="de"' in client.get("/sandboxes/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'lang="en"' in client.get("/agents/?lang=en").content.decode()
    assert 'lang="en"' in client.get("/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert client.get("/?lang=xx").cookies.get(settings.LANGUAGE_COOKIE_NAME) is None  # none we speak


def test_a_persons_language_goes_with_them_to_another_browser():
    """Issue #37: the choice lasts as a user setting too, not only in one browser's cookie."""
    from cocoon.models import Preference

    people = get_user_model().objects
    people.create_user("lena", password="a-long-pass-phrase-7")
    laptop = Client()
    assert laptop.post("/login", {"username": "lena", "password": "a-long-pass-phrase-7"}).status_code == 302
    assert 'lang="de"' in laptop.get("/?lang=de").content.decode()
    assert Preference.objects.get(user__username="lena").language == "de"
    phone = Client()  # no cookie of its own: the person's choice, kept in its cookie from then on
    phone.post("/login", {"username": "lena", "password": "a-long-pass-phrase-7"})
    assert 'lang="de"' in phone.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert phone.cookies[settings.LANGUAGE_COOKIE_NAME].value == "de"
    assert 'lang="en"' in phone.get("/?lang=en").content.decode()
    assert Preference.objects.get(user__username="lena").language == "en"
    token_client, _plain = logged_in()  # a token is no person: its choice stays in its browser
    token_client.get("/?lang=de")
    assert Preference.objects.count() == 1


def test_the_login_hint_names_where_this_server_wrote_its_token_and_settings_keep_the_checklist():
    login = Client().get("/login").content.decode()
    assert f"<code>{settings.ADMIN_TOKEN_FILE}</code>" in login
    assert ".data/admin-token.txt" not in login or str(settings.ADMIN_TOKEN_FILE).endswith(
        ".data/admin-token.txt"
    )
    client, _plain = logged_in()
    general = client.get("/settings/").content.decode()
    assert "data-checklist" in general  # reachable once the dashboard no longer shows it
    assert 'data-check="openFence"' in general
    from cocoon import config
    from ui.settings.general import GENERAL_FIELDS

    document = config.get_settings()
    form = {field.name: field.value_in(document) for field in GENERAL_FIELDS if field.kind != "bool"}
    refused = client.post("/settings/", form | {"sandbox__openAllowCidrs": "10.0.0.0/8\n10.0.5.1/24"})
    assert refused.status_code == 400
    assert "10.0.5.1/24 is no IPv4 network" in refused.content.decode()  # next to its field, kept
    assert client.post("/settings/", form | {"sandbox__openAllowCidrs": "10.0.5.0/24"}).status_code == 302
    assert config.get_settings()["sandbox"]["openAllowCidrs"] == ["10.0.5.0/24"]


def test_the_checklist_names_the_method_that_fixes_an_item():
    from cocoon.setup import run_checks

    fixes = {result.check.key: result.check.fix for result in run_checks()}
    assert fixes["image"] == "image.build"
    assert fixes["toolbox"] == "toolbox.install"
    assert fixes["adminToken"] is None


@pytest.mark.django_db(transaction=True)
def test_the_websocket_accepts_the_session_cookie_only_from_its_own_origin():
    client, _plain = logged_in()
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    async def subscribe(headers):
        communicator = WebsocketCommunicator(application, "/v1/ws", headers=headers)
        await communicator.connect()
        await communicator.send_json_to({"id": 1, "method": "events.subscribe", "params": {}})
        frame = await communicator.receive_json_from(timeout=5)
        await communicator.disconnect()
        return frame

    async def scenario():
        own = [(b"host", b"testserver"), (b"origin", b"http://testserver"), (b"cookie", cookie.encode())]
        assert "result" in await subscribe(own)
        foreign = [
            (b"host", b"testserver"),
            (b"origin", b"https://evil.example"),
            (b"cookie", cookie.encode()),
        ]
        assert (await subscribe(foreign))["error"]["code"] == "unauthorized"
        await database_sync_to_async(tokens.ApiToken.objects.all().delete)()
        assert (await subscribe(own))["error"]["code"] == "unauthorized"

    asyncio.run(scenario())


def test_a_patch_splits_into_files_with_numbered_and_paired_rows():
    patch = (
        "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n"
        "@@ -1,3 +1,3 @@\n keep\n-old\n+new\n+more\n"
        "diff --git a/b.bin b/b.bin\nBinary files differ\n"
    )
    first, second = parse_patch(patch)
    assert first.path == "a.txt"
    assert [(row.kind, row.old, row.new) for row in first.rows if row.kind != "meta"] == [
        ("hunk", None, None),
        ("context", 1, 1),
        ("del", 2, None),
        ("add", None, 2),
        ("add", None, 3),
    ]
    paired = [(left and left.text, right and right.text) for left, right in first.split_rows[-2:]]
    assert paired == [("old", "new"), (None, "more")]
    assert second.path == "b.bin"
    assert second.rows[0].kind == "meta"


def test_unknown_actions_are_not_found_and_bad_numbers_come_back_as_field_errors():
    client, _plain = logged_in()
    assert client.post("/sandboxes/sb_x/do/exec").status_code == 404
    assert client.post("/agents/ag_x/do/read").status_code == 404
    page = client.post("/sandboxes/", {"cpus": "many", "network": "none"}, follow=True).content.decode()
    assert "limits.cpus" in page


def profile_named(name):
    from agents.profiles import list_profiles
    from agents.schemas import serialize_profile

    return next((serialize_profile(p) for p in list_profiles() if p.name == name), None)


def test_profiles_are_created_and_edited_through_the_profile_methods():
    client, _plain = logged_in()
    form = {
        "name": "aider",
        "command": "aider\r\n--yes\r\n",
        "promptMode": "argument",
        "env": "A=1\r\nB=x=y",
        "secrets": "OPENAI_API_KEY, OTHER",
        "hooks": "on",
        "blockedPatterns": "Allow\\?\r\n",
        "resumeCommand": "aider\r\n--restore-chat-history\r\n",
        "answers": "y Enter\r\nEscape\r\n",
    }
    assert client.post("/settings/profiles", form).status_code == 302
    assert profile_named("aider") == {
        "name": "aider",
        "command": ["aider", "--yes"],
        "promptMode": "argument",
        "env": {"A": "1", "B": "x=y"},
        "secrets": ["OPENAI_API_KEY", "OTHER"],
        "hooks": True,
        "workingPattern": "",
        "blockedPatterns": ["Allow\\?"],
        "defaultModel": "",
        "resumeCommand": ["aider", "--restore-chat-history"],
        "resumeSessionCommand": [],  # the form has no field for it (profile.update sets it)
        "answers": [["y", "Enter"], ["Escape"]],
        "builtin": False,
    }
    page = client.get("/settings/profiles?edit=aider").content.decode()
    assert "aider\n--yes\n</textarea>" in page
    assert "aider\n--restore-chat-history\n</textarea>" in page
    assert "y Enter\nEscape\n</textarea>" in page
    client.post("/settings/profiles", dict(form, command="aider"))
    assert profile_named("aider")["command"] == ["aider"]
    assert "aider" in client.get("/agents/").content.decode()  # offered by the spawn form
    # A pattern that is no regular expression comes back as the method's field error.
    page = client.post("/settings/profiles", dict(form, blockedPatterns="(unclosed"), follow=True)
    assert "blockedPatterns.0" in page.content.decode()
    client.post("/settings/profiles", {"name": "aider", "delete": "1"})
    assert profile_named("aider") is None


def test_the_provider_test_button_sends_the_unsaved_form():
    """The form's values reach the real providers.test unsaved (nobody listens on this port)."""
    client, _plain = logged_in()
    assert 'formaction="/settings/providers/test"' in client.get("/settings/providers").content.decode()
    form = {"name": "gw", "kind": "openai", "baseUrl": "http://127.0.0.1:9/v1", "auth": "bearer"}
    answer = client.post("/settings/providers/test", form, HTTP_ACCEPT="application/json").json()
    assert answer["result"]["ok"] is False
    assert answer["result"]["result"] == "unreachable"
    assert "127.0.0.1:9" in answer["message"]


def test_saving_a_provider_replaces_its_whole_entry_and_a_bad_one_changes_nothing():
    from cocoon.config import get_settings

    client, _plain = logged_in()
    form = {"name": "gw", "kind": "http", "baseUrl": "http://127.0.0.1:9/v1", "auth": "header"}
    client.post("/settings/providers/save", form | {"header": "X-Key", "envPrefix": "GW"})
    assert get_settings()["providers"]["gw"]["header"] == "X-Key"
    client.post("/settings/providers/save", form | {"auth": "bearer"})  # the form cleared header
    saved = get_settings()["providers"]["gw"]
    assert (saved["auth"], "header" in saved, "envPrefix" in saved) == ("bearer", False, False)
    page = client.post(
        "/settings/providers/save",
        form | {"baseUrl": "ftp://x"},
        HTTP_REFERER="/settings/providers",
        follow=True,
    )
    assert "providers.gw.baseUrl" in page.content.decode()
    assert get_settings()["providers"]["gw"]["baseUrl"] == "http://127.0.0.1:9/v1"


def test_the_tasks_slot_appears_with_task_list():
    client, _plain = logged_in(TokenScope.AGENT)
    assert 'href="/tasks/"' in client.get("/").content.decode()
    assert client.get("/tasks/").status_code == 200


# -- tasks and schedules --------------------------------------------------------------------------------
# Runs are not started here (on_commit never fires inside a test's transaction): the pages and their
# actions are tested on the real methods; tests/test_ui_browser.py watches a real run finish.

STEP_FORM = {
    "stepProfile": ["shell", ""],
    "stepPrompt": ["echo hi > hi.txt; exit", ""],
    "stepTimeoutS": ["60", ""],
}


def test_a_task_from_the_form_of_an_agent_token_shows_its_steps_and_is_cancelled():
    from scheduling.models import Task

    client, _plain = logged_in(TokenScope.AGENT)
    form = {"prompt": "Say hi", "title": "greeter", "source": "new", "network": "none"} | STEP_FORM
    response = client.post("/tasks/", form)
    assert response.status_code == 302
    task = Task.objects.get(title="greeter")
    assert response["Location"] == f"/tasks/{task.id}/"
    assert task.workflow == [{"profile": "shell", "prompt": "echo hi > hi.txt; exit", "timeoutS": 60}]
    assert task.sandbox_spec == {"network": "none"}
    page = client.get(response["Location"]).content.decode()
    assert 'data-step="0"' in page
    assert 'data-step="1"' not in page
    assert "Cancel task" in page
    assert "Approve" not in page
    assert f'data-task="{task.id}"' in client.get("/tasks/").content.decode()

    assert client.post(f"/tasks/{task.id}/do/cancel").status_code == 302
    task.refresh_from_db()
    assert task.status == "cancelled"
    assert "Cancelled by ui-agent" in client.get(f"/tasks/{task.id}/").content.decode()


def test_a_failed_task_offers_a_retry_that_queues_it_again():
    from scheduling.models import Task

    client, _plain = logged_in(TokenScope.ADMIN)
    form = {"prompt": "Say hi", "title": "retry me", "source": "new", "network": "none"} | STEP_FORM
    client.post("/tasks/", form)
    task = Task.objects.get(title="retry me")
    assert "Retry" not in client.get(f"/tasks/{task.id}/").content.decode()  # queued: nothing to retry
    # As a run that failed in its own sandbox, since removed, leaves it.
    task.status, task.sandbox_id = "failed", "sb_gonebythen"
    task.reason = {"key": "step_exit", "params": {"step": 1, "code": 7}}
    task.steps = [{"status": "failed", "agentId": "ag_old"}]
    task.save()
    page = client.get(f"/tasks/{task.id}/").content.decode()
    assert "Retry from the first step in a new sandbox" in page
    assert client.post(f"/tasks/{task.id}/do/retry").status_code == 302
    task.refresh_from_db()
    assert (task.status, task.sandbox_id, task.steps) == ("queued", "", [{"status": "pending"}])
    assert "Started again from the failed step." in client.get(f"/tasks/{task.id}/").content.decode()


def test_the_spawn_form_says_before_the_click_which_profiles_have_no_provider_key():
    """Issue #37: a fresh server without a key tells the user what is missing before the spawn."""
    from cocoon import vault
    from cocoon.actors import SYSTEM_ACTOR

    client, _plain = logged_in(TokenScope.ADMIN)
    warning = client.get("/agents/").content.decode()
    assert "data-without-provider" in warning
    assert "No provider has a key for claude-code, codex" in warning
    assert 'href="/settings/providers"' in warning
    # The key is set right there (into the vault), and the page comes back without the warning for it.
    assert 'data-provider-key="ANTHROPIC_API_KEY"' in warning
    assert 'data-provider-key="ANTHROPIC_API_KEY"' in client.get("/").content.decode()  # the checklist's
    saved = client.post(
        "/settings/secrets",
        {"name": "ANTHROPIC_API_KEY", "value": "sk-ant-test-0123456789abcdefghij", "next": "/agents/"},
    )
    assert saved["Location"] == "/agents/"
    page = client.get("/agents/").content.decode()
    assert 'data-provider-key="ANTHROPIC_API_KEY"' not in page
    agent_client, _agent = logged_in(TokenScope.AGENT)  # not an admin's: no field to set it
    assert "data-provider-key" not in agent_client.get("/agents/").content.decode()
    assert "No provider has a key for codex:" in page
    vault.set_secret("OPENAI_API_KEY", "sk-test-0123456789abcdefghij", actor=SYSTEM_ACTOR)
    assert "data-without-provider" not in client.get("/agents/").content.decode()
    from cocoon.registry import registry

    listed = registry.dispatch("profile.list", {}, SYSTEM_ACTOR, "en")
    assert {profile["name"]: profile["providerMissing"] for profile in listed} == {
        "claude-code": False,
        "codex": False,
        "shell": False,
    }


def test_a_bad_task_form_comes_back_with_its_field_errors_and_values():
    client, _plain = logged_in()
    form = {"prompt": "x", "source": "new", "stepProfile": ["nope"], "stepPrompt": [""], "stepTimeoutS": [""]}
    response = client.post("/tasks/", form)
    assert response.status_code == 400
    page = response.content.decode()
    assert "workflow.0.profile</code>: There is no agent profile nope." in page
    assert ">x</textarea>" in page


def in_review(title: str, **fields) -> str:
    """A task whose run ended in review (the runner's part is tested in tests/test_scheduling.py)."""
    from agents.profiles import ensure_profiles
    from cocoon.actors import SYSTEM_ACTOR
    from scheduling import services
    from scheduling.models import Task

    ensure_profiles()
    task = services.create_task(
        {"prompt": "p", "title": title, "workflow": [{"profile": "shell"}]}, actor=SYSTEM_ACTOR, start=False
    )
    Task.objects.filter(pk=task.id).update(status="review", **fields)
    return task.id


def test_a_task_in_review_shows_its_report_and_diff_and_is_approved_or_rejected():
    from scheduling.models import Task

    patch = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new line\n"
    report = {"ok": False, "summary": "tests fail", "autoClose": False, "details": {"failed": 3}}
    diff = {"files": [{"path": "a.txt", "status": "M", "added": 1, "deleted": 1}], "patch": patch}
    approve_me = in_review("approve me", report=report, diff=diff)
    reject_me = in_review("reject me")
    client, _plain = logged_in()

    page = client.get(f"/tasks/{approve_me}/").content.decode()
    assert "tests fail" in page
    assert "&quot;failed&quot;: 3" in page
    assert "<code>a.txt</code>" in page
    assert "new line" in page
    assert "Approve" in page
    assert "Reject" in page
    assert "Cancel task" not in page
    # A pull request needs the task's sandbox (this one has none): the method answers, nothing changes.
    client.post(f"/tasks/{approve_me}/do/approve", {"prTitle": "Fix"})
    assert Task.objects.get(pk=approve_me).status == "review"

    assert client.post(f"/tasks/{approve_me}/do/approve").status_code == 302
    assert client.post(f"/tasks/{reject_me}/do/reject").status_code == 302
    assert Task.objects.get(pk=approve_me).status == "done"
    assert Task.objects.get(pk=reject_me).status == "cancelled"
    page_url = f"http://testserver/tasks/{reject_me}/"
    conflict = client.post(f"/tasks/{reject_me}/do/reject", HTTP_REFERER=page_url, follow=True)
    assert conflict.redirect_chain == [(page_url, 302)]  # back on the task's page, with the message
    assert "not waiting for a review" in conflict.content.decode()
    assert client.post(f"/tasks/{reject_me}/do/explode").status_code == 404
    refused = client.post(f"/tasks/{reject_me}/do/retry", HTTP_REFERER=page_url, follow=True)
    assert "only a failed task can be retried" in refused.content.decode()


def test_the_preview_endpoint_answers_the_nightly_berlin_times_and_a_bad_cron_clearly():
    client, _plain = logged_in(TokenScope.AGENT)
    query = {"cron": "0 2 * * *", "timezone": "Europe/Berlin", "after": "2025-03-29T12:00:00Z"}
    answer = client.get("/schedules/preview", query, HTTP_ACCEPT="application/json").json()
    # 02:00 does not exist on 30 March in Berlin: the run comes right after the jump.
    assert answer["times"][:3] == [
        "2025-03-30T03:00:00+02:00",
        "2025-03-31T02:00:00+02:00",
        "2025-04-01T02:00:00+02:00",
    ]
    assert answer["labels"][0] == "2025-03-30 03:00 +02:00"
    bad = client.get("/schedules/preview", {"cron": "0 2 * *"}, HTTP_ACCEPT="application/json")
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"] == {"cron": "Not a valid cron expression: Wrong number of fields."}
    zone = client.get(
        "/schedules/preview", {"cron": "@daily", "timezone": "Mars/Base"}, HTTP_ACCEPT="application/json"
    )
    assert zone.json()["error"]["fields"] == {"timezone": "Unknown timezone Mars/Base."}


def test_a_schedule_is_created_edited_run_and_deleted_from_its_form():
    from scheduling.models import Schedule, Task

    client, _plain = logged_in(TokenScope.AGENT)
    form = {
        "name": "nightly deps",
        "cron": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "overlap": "queue",
        "keepRuns": "3",
        "enabled": "on",
        "prompt": "Update the dependencies",
        "source": "new",
        "network": "none",
    } | STEP_FORM
    response = client.post("/schedules/new", form)
    assert response.status_code == 302
    schedule = Schedule.objects.get(name="nightly deps")
    assert (schedule.cron, schedule.timezone, schedule.overlap, schedule.keep_runs) == (
        "0 2 * * *",
        "Europe/Berlin",
        "queue",
        3,
    )
    assert schedule.template["workflow"] == [
        {"profile": "shell", "prompt": "echo hi > hi.txt; exit", "timeoutS": 60}
    ]
    page = client.get(response["Location"]).content.decode()
    assert page.count("02:00 +0") == 5  # the next runs, before any script runs
    assert "nightly deps" in client.get("/schedules/").content.decode()

    bad = client.post(response["Location"], form | {"cron": "0 25 * * *"})
    assert bad.status_code == 400
    body = bad.content.decode()
    assert '<p class="error" id="sc-cron-error">Not a valid cron expression: Bad hour.</p>' in body
    assert 'value="0 25 * * *"' in body  # what was typed stays in the form
    schedule.refresh_from_db()
    assert schedule.cron == "0 2 * * *"
    client.post(response["Location"], form | {"cron": "@hourly", "enabled": ""})
    schedule.refresh_from_db()
    assert (schedule.cron, schedule.enabled) == ("0 * * * *", False)  # stored expanded

    run = client.post(f"/schedules/{schedule.id}/do/run")
    task = Task.objects.get(schedule=schedule)
    assert run["Location"] == f"/tasks/{task.id}/"
    assert task.id in client.get(f"/schedules/{schedule.id}/").content.decode()  # listed with its runs
    assert client.post(f"/schedules/{schedule.id}/do/delete")["Location"] == "/schedules/"
    assert not Schedule.objects.filter(pk=schedule.id).exists()
    assert Task.objects.filter(pk=task.id).exists()  # its runs stay as tasks


def test_every_status_state_rule_and_source_has_a_word_in_each_language():
    """Issue #37: statuses are shown as words, never as the raw value (which is the tooltip's)."""
    from django.utils import translation

    from agents.choices import AgentStatus, StatusRule, StatusSource
    from sandboxes.choices import NodeState, SandboxState
    from scheduling.choices import StepStatus, TaskStatus
    from ui import labels

    states = {
        *AgentStatus.values,
        *SandboxState.values,
        *NodeState.values,
        *TaskStatus.values,
        *StepStatus.values,
    }
    assert states <= set(labels.STATES)
    assert set(StatusRule.values) == set(labels.RULES)
    assert set(StatusSource.values) == set(labels.SOURCES)
    with translation.override("de"):
        assert labels.word("status", "blocked") == "wartet auf dich"
        assert labels.words()["rule"]["question"] == "eine Frage auf dem Bildschirm"
    assert labels.word("status", "from-a-newer-server") == "from-a-newer-server"
