"""People in projects (#30): a person sees and does what their role in their session's project allows, a
person in no project sees nothing, and a change of role or membership ends their open sessions at once.
On main before this (a non-superuser acted as an agent token of everything) each attack here succeeded."""

import json
import secrets
import time

import pytest
from django.contrib.auth import get_user_model

from cocoon import tenancy, tokens
from cocoon.choices import Role, TokenScope
from cocoon.models import Membership
from tests.security.test_revocation import CLOSE_UNAUTHORIZED, browser_ws, frames_until_closed, manage


def rpc(ws, method: str, params: dict | None = None) -> dict:
    ws.send(json.dumps({"id": 1, "method": method, "params": params or {}}))
    while True:
        frame = json.loads(ws.recv(timeout=30))
        if frame.get("id") == 1:
            return frame


@pytest.fixture(scope="module")
def people(cocoond, sandbox_image):
    """A project with an owner, a member and a viewer, a person in no project, and a sandbox of the
    project's (made by an admin) and one of the default project's."""
    suffix = secrets.token_hex(3)
    project = f"people-{suffix}"
    cocoond.call("projects.create", {"id": project, "name": "People"})
    names = {role: f"{role}-{suffix}" for role in ("owner", "member", "viewer", "nobody")}
    users = "; ".join(f"User.objects.create_user({name!r}, password='pw-{name}')" for name in names.values())
    manage(cocoond, f"from django.contrib.auth import get_user_model; User = get_user_model(); {users}")
    for role in ("owner", "member", "viewer"):
        cocoond.call("projects.set_member", {"project": project, "user": names[role], "role": role})
    theirs = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image, "project": project})
    other = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    yield {"project": project, "names": names, "theirs": theirs, "other": other, "image": sandbox_image}
    for sandbox in (theirs, other):
        cocoond.post("sandbox.delete", {"sandboxId": sandbox["id"]})


def session(cocoond, name: str):
    return browser_ws(cocoond, name, f"pw-{name}")


def test_a_viewer_reads_and_changes_nothing(cocoond, people):
    browser, ws = session(cocoond, people["names"]["viewer"])
    with ws:
        listed = rpc(ws, "sandbox.list")["result"]
        assert [each["id"] for each in listed] == [people["theirs"]["id"]]
        assert rpc(ws, "sandbox.diff", {"sandboxId": people["theirs"]["id"]})["result"] is not None
        for method, params in [
            ("sandbox.create", {"network": "none", "image": people["image"]}),
            ("sandbox.exec", {"sandboxId": people["theirs"]["id"], "command": ["true"]}),
            ("files.write", {"sandboxId": people["theirs"]["id"], "path": "/workspace/x", "content": "x"}),
            ("sandbox.stop", {"sandboxId": people["theirs"]["id"]}),
        ]:
            assert rpc(ws, method, params)["error"]["code"] == "forbidden", method
        catalogue = {method["name"] for method in rpc(ws, "system.methods")["result"]}
        assert "sandbox.list" in catalogue
        assert "sandbox.exec" not in catalogue
    browser.close()
    assert cocoond.call("sandbox.get", {"sandboxId": people["theirs"]["id"]})["state"] == "running"


def test_a_member_drives_its_projects_sandboxes_only_and_changes_no_members(cocoond, people):
    browser, ws = session(cocoond, people["names"]["member"])
    with ws:
        executed = rpc(ws, "sandbox.exec", {"sandboxId": people["theirs"]["id"], "command": ["echo", "hi"]})
        assert executed["result"]["stdout"] == "hi\n"
        other = rpc(ws, "sandbox.exec", {"sandboxId": people["other"]["id"], "command": ["true"]})
        assert other["error"]["code"] == "not_found"
        refused = rpc(
            ws,
            "projects.set_member",
            {"project": people["project"], "user": people["names"]["member"], "role": "owner"},
        )
        assert refused["error"]["code"] == "forbidden"
    browser.close()


def test_a_person_in_no_project_sees_nothing(cocoond, people):
    browser, ws = session(cocoond, people["names"]["nobody"])
    with ws:
        assert rpc(ws, "sandbox.list")["result"] == []
        assert rpc(ws, "sandbox.get", {"sandboxId": people["other"]["id"]})["error"]["code"] == "not_found"
        made = rpc(ws, "sandbox.create", {"network": "none", "image": people["image"]})
        assert made["error"]["code"] == "forbidden"  # one in no project only reads (nothing)
    browser.close()


def test_a_demoted_or_removed_person_loses_their_open_sessions_at_once(cocoond, people):
    names, project = people["names"], people["project"]
    owner_browser, owner_ws = session(cocoond, names["owner"])
    member_browser, member_ws = session(cocoond, names["member"])
    with owner_ws, member_ws:
        assert "result" in rpc(member_ws, "sandbox.list")
        began = time.monotonic()
        demoted = rpc(
            owner_ws, "projects.set_member", {"project": project, "user": names["member"], "role": "viewer"}
        )
        assert demoted["result"]["role"] == "viewer"
        _frames, closed = frames_until_closed(member_ws, timeout=5)
        assert closed.rcvd.code == CLOSE_UNAUTHORIZED
        assert time.monotonic() - began < 2
    member_browser.close()
    # Opened again, the session has the rights the person has now.
    member_browser, member_ws = session(cocoond, names["member"])
    with member_ws:
        exec_params = {"sandboxId": people["theirs"]["id"], "command": ["true"]}
        assert rpc(member_ws, "sandbox.exec", exec_params)["error"]["code"] == "forbidden"
        cocoond.call("projects.remove_member", {"project": project, "user": names["member"]})
        _frames, closed = frames_until_closed(member_ws, timeout=5)
        assert closed.rcvd.code == CLOSE_UNAUTHORIZED
    member_browser.close()
    owner_browser.close()
    cocoond.call("projects.set_member", {"project": project, "user": names["member"], "role": "member"})


def test_a_person_in_two_projects_switches_between_them(cocoond, people, sandbox_image):
    names = people["names"]
    second = f"second-{secrets.token_hex(3)}"
    cocoond.call("projects.create", {"id": second, "name": "Second"})
    cocoond.call("projects.set_member", {"project": second, "user": names["owner"], "role": "viewer"})
    made = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image, "project": second})
    try:
        browser, ws = session(cocoond, names["owner"])
        with ws:
            assert made["id"] not in {each["id"] for each in rpc(ws, "sandbox.list")["result"]}
        page = browser.get("/sandboxes/").text
        assert 'name="project"' in page  # the switch, with both projects
        browser.post(
            "/project", data={"project": second, "csrfmiddlewaretoken": browser.cookies["csrftoken"]}
        )
        assert made["id"] in browser.get("/sandboxes/").text
        assert people["theirs"]["id"] not in browser.get("/sandboxes/").text
        # A project one is no member of changes nothing.
        browser.post(
            "/project", data={"project": "default", "csrfmiddlewaretoken": browser.cookies["csrftoken"]}
        )
        assert made["id"] in browser.get("/sandboxes/").text
        browser.close()
    finally:
        cocoond.call("sandbox.delete", {"sandboxId": made["id"]})


def test_a_persons_own_token_acts_as_they_do_at_each_call(cocoond, people, sandbox_image):
    names, project = people["names"], people["project"]
    suffix = secrets.token_hex(3)
    person = f"scripter-{suffix}"
    make_user = f"get_user_model().objects.create_user({person!r}, password='pw-{person}')"
    manage(cocoond, f"from django.contrib.auth import get_user_model; {make_user}")
    cocoond.call("projects.set_member", {"project": project, "user": person, "role": "member"})
    browser, ws = session(cocoond, person)
    with ws:
        created = rpc(ws, "tokens.create_own", {"name": "my-script"})["result"]
        assert (created["scope"], created["user"], created["project"]) == ("user", person, project)
        assert [each["id"] for each in rpc(ws, "tokens.mine")["result"]] == [created["id"]]
    browser.close()
    token = created["token"]
    exec_params = {"sandboxId": people["theirs"]["id"], "command": ["true"]}
    assert [each["id"] for each in cocoond.call("sandbox.list", token=token)] == [people["theirs"]["id"]]
    assert cocoond.call("sandbox.exec", exec_params, token=token)["exitCode"] == 0
    # Demoted: the token's very next call has a viewer's rights.
    cocoond.call("projects.set_member", {"project": project, "user": person, "role": "viewer"})
    refused = cocoond.post("sandbox.exec", exec_params, token=token)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden")
    # Nobody else's token is revoked through tokens.revoke_own, and tokens that are nobody's have none.
    other = cocoond.call("tokens.create", {"name": "not-mine", "scope": "agent", "project": project})
    owner_browser, owner_ws = session(cocoond, names["owner"])
    with owner_ws:
        assert rpc(owner_ws, "tokens.revoke_own", {"tokenId": created["id"]})["error"]["code"] == "not_found"
    owner_browser.close()
    assert (
        cocoond.post("tokens.create_own", {"name": "x"}, token=other["token"]).json()["error"]["code"]
        == "forbidden"
    )


@pytest.mark.django_db(transaction=True)
def test_a_persons_token_stops_once_they_are_deactivated_and_follows_their_role():
    person = get_user_model().objects.create_user("deactivated-soon", password="pw")
    Membership.objects.create(project_id=tenancy.default_project(), user=person, role=Role.OWNER)
    _token, plain = tokens.create_token("theirs", TokenScope.USER, user=person)
    assert tokens.authenticate(plain).role == Role.OWNER  # and remembered (tokencache)
    membership = Membership.objects.get(user=person)
    membership.role = Role.VIEWER
    membership.save()  # heard at once: the cache forgets the person's tokens
    assert tokens.authenticate(plain).read_only
    person.is_active = False
    person.save()
    assert tokens.authenticate(plain) is None
