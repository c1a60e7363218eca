"""Settings → Nodes (the engines sandboxes run on: their state and room, drain, undrain, remove) and a
sandbox's node on its page, through Django's test client on rows written to the database: no remote
engine answers, the methods only read and change the rows."""

import pytest
from django.utils import timezone

from cocoon.choices import TokenScope
from egress import remote
from sandboxes.models import LOCAL_NODE, Node, Sandbox
from sandboxes.nodes import local_node
from tests.test_ui import logged_in

pytestmark = pytest.mark.django_db

PAGE = "/settings/nodes"
PAGE_URL = f"http://testserver{PAGE}"


def remote_node(name: str = "node-b", **fields) -> Node:
    fields = {
        "url": "tcp://10.0.0.12:2376",
        "cert": "-----BEGIN CERTIFICATE-----",
        "labels": {"zone": "b", "gpu": "no"},
        "capacity": {"cpus": 32, "memoryMb": 65536, "maxSandboxes": 20},
        "facts": {"version": "28.2.2", "runtimes": ["runsc"], "liveRestore": True},
        "checked_at": timezone.now(),
    } | fields
    return Node.objects.create(name=name, **fields)


def make_sandbox(name: str, node: Node, cpus: float = 1, memory_mb: int = 64) -> Sandbox:
    return Sandbox.objects.create(
        name=name, image="i", network="none", cpus=cpus, memory_mb=memory_mb, pids=16, node=node.id
    )


def row(page: str, node_id: str) -> str:
    start = page.index(f'data-node="{node_id}"')
    return page[start : page.index("</tr>", start)]


def action(node_id: str, word: str) -> str:
    return f"/settings/nodes/{node_id}/do/{word}"


def test_the_page_lists_the_local_engine_and_a_remote_node_with_their_state_and_room():
    local = local_node()
    remote = remote_node()
    make_sandbox("build", remote)
    make_sandbox("web", remote, cpus=0.5, memory_mb=128)
    client, _plain = logged_in()

    page = client.get(PAGE).content.decode()
    assert f'<a href="{PAGE}" aria-current="page">Nodes</a>' in page
    assert "deploy/nodes.md" in page
    assert "node.add" in page
    assert page.index(f'data-node="{local.id}"') < page.index(f'data-node="{remote.id}"')  # local first
    mine = row(page, local.id)
    assert "local engine" in mine
    assert '<span class="state state-ready" data-field="state" title="ready">ready</span>' in mine
    assert '<td data-field="room">0 / 100</td>' in mine  # no sandboxes of its 100
    other = row(page, remote.id)
    assert "<code>tcp://10.0.0.12:2376</code>" in other
    assert '<span class="state state-ready" data-field="state" title="ready">ready</span>' in other
    assert '<td data-field="room">2 / 20</td>' in other
    assert '<td data-field="room">1.5 / 32</td>' in other
    assert '<td data-field="room">192 / 65536</td>' in other
    assert "<code>gpu=no</code> <code>zone=b</code>" in other
    assert "28.2.2" in other
    assert "runsc" in other
    assert "<td>yes</td>" in other  # live-restore
    assert remote.checked_at.isoformat()[:19] in other
    assert 'data-field="error"' not in other


def test_an_unreachable_node_is_marked_with_its_error_and_a_capacity_not_known_shows_as_such():
    remote = remote_node(reachable=False, error="connection refused", capacity={}, facts={}, checked_at=None)
    client, _plain = logged_in()

    other = row(client.get(PAGE).content.decode(), remote.id)
    assert (
        '<span class="state state-unreachable" data-field="state" title="unreachable">unreachable</span>'
        in other
    )
    assert '<span class="error" data-field="error">connection refused</span>' in other
    assert '<td data-field="room">0 / —</td>' in other
    # Whether it was drained before it went away is not in what node.list answers: both are offered.
    assert f'action="{action(remote.id, "drain")}"' in other
    assert f'action="{action(remote.id, "undrain")}"' in other


def test_each_nodes_egress_proxy_is_shown_and_one_on_a_node_away_is_down():
    away = remote_node(reachable=False)
    idle = remote_node("node-c", url="tcp://10.0.0.13:2376")
    Sandbox.objects.create(
        name="out", image="i", network="egress", cpus=1, memory_mb=64, pids=16, state="running", node=away.id
    )
    client, _plain = logged_in()

    page = client.get(PAGE).content.decode()
    assert '<td data-field="proxy">down</td>' in row(page, away.id)  # it has egress sandboxes, no answer
    assert '<td data-field="proxy">—</td>' in row(page, idle.id)  # no sandbox that needs one
    assert [(proxy.name, proxy.running) for proxy in remote.statuses()] == [("node-b", False)]


def test_drain_and_undrain_change_the_node_and_the_button_offered():
    remote = remote_node()
    client, _plain = logged_in()
    assert f'action="{action(remote.id, "undrain")}"' not in row(client.get(PAGE).content.decode(), remote.id)

    response = client.post(action(remote.id, "drain"), follow=True)
    assert response.redirect_chain == [(PAGE, 302)]
    assert Node.objects.get(pk=remote.pk).draining
    page = response.content.decode()
    assert "Node node-b is draining: no new sandboxes go there." in page
    other = row(page, remote.id)
    assert '<span class="state state-draining" data-field="state" title="draining">draining</span>' in other
    assert f'action="{action(remote.id, "undrain")}"' in other
    assert f'action="{action(remote.id, "drain")}"' not in other

    response = client.post(action(remote.id, "undrain"), follow=True)
    assert not Node.objects.get(pk=remote.pk).draining
    assert "Node node-b takes new sandboxes again." in response.content.decode()
    assert client.post(action(remote.id, "reboot")).status_code == 404  # only the listed actions


def test_a_node_that_holds_a_sandbox_is_not_removed_and_the_page_says_why():
    remote = remote_node()
    make_sandbox("build", remote)
    client, _plain = logged_in()

    response = client.post(action(remote.id, "remove"), HTTP_REFERER=PAGE_URL, follow=True)
    assert response.redirect_chain == [(PAGE_URL, 302)]  # back on the page, with the message
    page = response.content.decode()
    assert '<li class="error">Node node-b still holds sandboxes' in page
    assert Node.objects.filter(pk=remote.pk).exists()
    assert f'data-node="{remote.id}"' in page


def test_an_empty_node_is_removed():
    remote = remote_node()
    client, _plain = logged_in()

    response = client.post(action(remote.id, "remove"), follow=True)
    assert response.redirect_chain == [(PAGE, 302)]
    assert not Node.objects.filter(pk=remote.pk).exists()
    page = response.content.decode()
    assert "Node node-b was removed." in page
    assert f'data-node="{remote.id}"' not in page


def test_the_local_node_has_no_remove_button_and_cannot_be_removed_anyway():
    remote = remote_node()
    client, _plain = logged_in()

    page = client.get(PAGE).content.decode()
    assert action(LOCAL_NODE, "remove") not in page
    assert f'action="{action(LOCAL_NODE, "drain")}"' in row(page, LOCAL_NODE)
    remove = row(page, remote.id)
    assert f'action="{action(remote.id, "remove")}"' in remove
    assert "data-confirm=" in remove
    response = client.post(action(LOCAL_NODE, "remove"), HTTP_REFERER=PAGE_URL, follow=True)
    assert "The local node cannot be removed." in response.content.decode()
    assert Node.objects.filter(pk=LOCAL_NODE).exists()


def test_an_agent_token_gets_a_403_on_the_page_and_its_actions():
    remote = remote_node()
    client, _plain = logged_in(TokenScope.AGENT)

    assert client.get(PAGE).status_code == 403
    for word in ("drain", "remove"):
        response = client.post(action(remote.id, word))
        assert response.status_code == 403
        assert "<h1>Not allowed</h1>" in response.content.decode()
    assert Node.objects.get(pk=remote.pk).draining is False


def test_the_settings_navigation_links_to_the_nodes_page():
    client, _plain = logged_in()
    page = client.get("/settings/").content.decode()
    assert f'<a href="{PAGE}" >Nodes</a>' in page


def test_a_sandboxs_page_names_its_node_for_an_admin_and_shows_its_id_to_others():
    remote = remote_node()
    sandbox = make_sandbox("build", remote)

    admin, _plain = logged_in()
    page = admin.get(f"/sandboxes/{sandbox.id}/").content.decode()
    assert f'<dd data-field="node"><a href="{PAGE}">node-b</a></dd>' in page

    agent, _plain = logged_in(TokenScope.AGENT)
    page = agent.get(f"/sandboxes/{sandbox.id}/").content.decode()
    assert f'<dd data-field="node"><code>{remote.id}</code></dd>' in page
    assert "node-b" not in page


def test_a_node_is_added_from_the_page_and_a_refused_one_comes_back_with_its_errors_and_keeps_nothing():
    """Issue #37: nodes are added from the UI, as node.add takes them (its URL and TLS files); a refusal
    shows each error at its field with the input kept, and nothing is made."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    client, _plain = logged_in()
    page = client.get(PAGE).content.decode()
    assert 'enctype="multipart/form-data"' in page
    assert "cocoon call node.add -" in page  # the same from a shell, to copy
    before = set(Node.objects.values_list("id", flat=True))

    def add(**form):
        files = {
            part: SimpleUploadedFile(f"{part}.pem", b"-----BEGIN X-----\n") for part in ("ca", "cert", "key")
        }
        return client.post(PAGE, {"name": "node-c", "labels": "zone=c\n", **form} | files)

    bad_url = add(url="http://10.0.0.13:2375")
    assert bad_url.status_code == 400
    html = bad_url.content.decode()
    url_field = html[html.index('id="nd-url"') : html.index('for="nd-labels"')]
    assert "Must be tcp://host:port." in url_field
    assert 'value="node-c"' in html
    assert "zone=c" in html
    # An engine that does not answer there (nothing listens on port 1): refused at the URL, nothing kept.
    silent = add(url="tcp://127.0.0.1:1").content.decode()
    assert "did not answer" in silent[silent.index('id="nd-url"') : silent.index('for="nd-labels"')]
    assert set(Node.objects.values_list("id", flat=True)) == before
    taken = client.post(PAGE, {"name": "local", "url": "tcp://127.0.0.1:1"})  # no TLS files at all
    assert "needs tls" in taken.content.decode()
