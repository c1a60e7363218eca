"""The dashboard's fleet view (what needs you, the wall of agent cards) and Settings → Notifications,
through Django's test client on rows written to the database: no agent runs."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from agents import services as agent_services
from agents.models import Agent
from attention.choices import ItemState
from attention.models import Delivery, Item
from cocoon import config, vault
from cocoon.choices import TokenScope
from sandboxes.models import Sandbox
from scheduling.models import Task
from tests.test_ui import in_review, logged_in

pytestmark = pytest.mark.django_db
# The dashboard's setup checklist asks the engine (it makes the instance's networks and volume).
engine = pytest.mark.usefixtures("docker_client")

QUESTION = "Deploy to production? [y/N]"
URL = "ntfy://alice:s3cret-pass@127.0.0.1:1/cocoon"
CHANNEL_FORM = {
    "name": "ops",
    "type": "apprise",
    "url": URL,
    "kinds": ["agent_blocked", "task_review"],
    "sandboxes": "build, web",
    "delayS": "30",
    "quiet-from": "22:00",
    "quiet-to": "07:00",
    "quiet-timezone": "Europe/Berlin",
    "enabled": "on",
}


def make_sandbox(name: str = "build") -> Sandbox:
    return Sandbox.objects.create(name=name, image="i", network="none", cpus=1, memory_mb=64, pids=16)


def cards(page: str) -> list[str]:
    """The agent ids on the wall, in its order."""
    return re.findall(r'<li class="card [^"]*" data-agent="([^"]+)"', page)


def between(page: str, start: str, end: str) -> str:
    return page[page.index(start) : page.index(end)]


@engine
def test_the_dashboard_lists_what_needs_you_first_and_then_the_agents_blocked_first():
    sandbox = make_sandbox()
    three_minutes_ago = timezone.now() - timedelta(minutes=3, seconds=5)

    def agent(status: str, **fields) -> Agent:
        fields.setdefault("status_at", three_minutes_ago)
        return Agent.objects.create(sandbox=sandbox, profile="shell", status=status, **fields)

    idle = agent("idle")
    clean_exit = agent("exited", exit_reason="exited", exit_code=0)
    killed = agent("exited", exit_reason="killed", status_at=timezone.now())
    crashed = agent("exited", exit_reason="exited", exit_code=1)
    vanished = agent("exited", exit_reason="session_vanished", status_at=timezone.now())
    working = agent("working", rule="working_indicator", last_screen="$ make\n\nbuilding step 7…\n")
    done = agent("done")
    stuck = agent(
        "blocked", name="deploy the release", rule="question", last_screen=f"$ ./deploy.sh\n{QUESTION}\n"
    )
    agent_services.publish(stuck)  # as the poller does: the feed opens an item with the question
    [item] = Item.objects.filter(agent_id=stuck.id)
    task_id = in_review("ship the release")
    Task.objects.filter(pk=task_id).update(steps=[{"status": "done", "agentId": working.id}])
    client, _plain = logged_in()

    page = client.get("/").content.decode()
    needs_you = between(page, 'data-live-list="attention"', 'data-live-list="agents"')
    assert f'data-item="{item.id}"' in needs_you
    assert "Agent “deploy the release” (shell) in build waits for an answer." in needs_you
    assert QUESTION in needs_you
    assert f'href="/agents/{stuck.id}/"' in needs_you
    assert f'action="/attention/{item.id}/do/ack"' in needs_you
    # Crashed and vanished share a rank: the longest in its status first (as clean_exit and killed).
    order = [stuck, done, crashed, vanished, working, idle, clean_exit, killed]
    assert cards(page) == [agent.id for agent in order]
    card = between(page, f'data-agent="{working.id}"', f'data-agent="{idle.id}"')
    # Statuses and rules in words, the value in the tooltip (issue #37).
    assert '<span data-field="rule" title="working_indicator">its working indicator</span>' in card
    assert 'data-field="status" title="working">working</span>' in card
    assert "3\xa0minutes" in card
    assert f'<a href="/tasks/{task_id}/">ship the release</a>' in card
    assert '<pre class="tail" data-field="screenTail">$ make\nbuilding step 7…</pre>' in card
    assert ">build</a>" in card  # the sandbox by its name
    # The agents page has the same cards (unsorted, unpaged); the script fills in how long.
    agents_page = client.get("/agents/").content.decode()
    assert f'data-agent="{stuck.id}"' in agents_page
    assert '<span data-field="rule" title="question">a question on its screen</span>' in agents_page
    assert 'data-field="status" title="blocked">waits for you</span>' in agents_page

    assert client.post(f"/attention/{item.id}/do/snooze").status_code == 302
    assert Item.objects.get(pk=item.id).snoozed_until > timezone.now() + timedelta(minutes=59)
    assert f'data-item="{item.id}"' not in client.get("/").content.decode()
    Item.objects.filter(pk=item.id).update(snoozed_until=None)
    assert client.post(f"/attention/{item.id}/do/ack").status_code == 302
    assert Item.objects.get(pk=item.id).state == ItemState.ACKED
    assert "Nothing waits for you." in client.get("/").content.decode()
    assert client.post(f"/attention/{item.id}/do/close").status_code == 404


@engine
def test_a_fleet_of_200_agents_is_paged_48_cards_at_a_time_in_one_order():
    sandbox = make_sandbox()
    statuses = ["working", "idle", "exited", "blocked"]
    Agent.objects.bulk_create(
        Agent(sandbox=sandbox, profile="shell", status=statuses[number % 4]) for number in range(200)
    )
    blocked = set(Agent.objects.filter(status="blocked").values_list("id", flat=True))
    client, _plain = logged_in()

    first = client.get("/").content.decode()
    assert len(cards(first)) == 48
    assert set(cards(first)) <= blocked  # 50 are blocked: they fill the first page
    assert 'href="?page=2" rel="next"' in first
    assert "data-partial" in first
    pages = [cards(client.get(f"/?page={number}").content.decode()) for number in range(1, 6)]
    assert [len(page) for page in pages] == [48, 48, 48, 48, 8]
    assert len({agent_id for page in pages for agent_id in page}) == 200
    last = client.get("/?page=5").content.decode()
    assert 'rel="next"' not in last
    assert 'href="?page=4" rel="prev"' in last


def test_a_channel_is_saved_with_its_url_in_the_vault_and_the_page_shows_only_its_preview():
    client, _plain = logged_in()
    assert client.post("/settings/notifications", CHANNEL_FORM).status_code == 302
    assert vault.read_secret("NOTIFY_OPS_URL") == URL
    channel = config.get_settings()["notifications"]["channels"]["ops"]
    assert channel == {
        "type": "apprise",
        "urlPreview": channel["urlPreview"],
        "enabled": True,
        "kinds": ["agent_blocked", "task_review"],
        "sandboxes": ["build", "web"],
        "delayS": 30,
        "quietHours": {"from": "22:00", "to": "07:00", "timezone": "Europe/Berlin"},
    }
    # An item of a sandbox it hears of is to be sent: the delivery log shows it.
    stuck = Agent.objects.create(sandbox=make_sandbox(), profile="shell", status="blocked")
    agent_services.publish(stuck)
    delivery = Delivery.objects.get(channel="ops")

    page = client.get("/settings/notifications").content.decode()
    assert f"<code>{escape(channel['urlPreview'])}</code>" in page
    assert "s3cret-pass" not in page
    assert "22:00\u201307:00 Europe/Berlin" in page
    assert f'data-delivery="{delivery.id}"' in page
    assert 'href="/settings/notifications" aria-current="page"' in page

    edit = client.get("/settings/notifications?edit=ops").content.decode()
    assert 'value="ops" pattern="[a-z0-9][a-z0-9\\-]{0,31}" required readonly' in edit
    assert 'value="agent_blocked" checked' in edit
    assert 'value="agent_done" >' in edit
    # Saved again with an empty URL field: the URL stays.
    form = CHANNEL_FORM | {"url": "", "kinds": ["agent_done"], "enabled": ""}
    assert client.post("/settings/notifications", form).status_code == 302
    channel = config.get_settings()["notifications"]["channels"]["ops"]
    assert (channel["kinds"], channel["enabled"]) == (["agent_done"], False)
    assert vault.read_secret("NOTIFY_OPS_URL") == URL
    # Emptied quiet hours and delay are none any more.
    quiet = {"quiet-from": "", "quiet-to": "", "quiet-timezone": "", "delayS": ""}
    assert client.post("/settings/notifications", CHANNEL_FORM | quiet).status_code == 302
    channel = config.get_settings()["notifications"]["channels"]["ops"]
    assert "quietHours" not in channel
    assert "delayS" not in channel


def test_a_bad_channel_url_comes_back_as_an_error_next_to_its_field_and_nothing_is_saved():
    client, _plain = logged_in()
    response = client.post("/settings/notifications", CHANNEL_FORM | {"name": "bad", "url": "nope://x"})
    assert response.status_code == 400
    page = response.content.decode()
    url_field = between(page, 'id="c-url"', 'id="c-secret"')
    assert 'aria-invalid="true" aria-describedby="e-url"' in url_field
    assert '<p class="error" id="e-url">Is not a notification URL Apprise knows' in url_field
    assert "nope://x" not in page  # write-only, even as typed
    assert 'value="bad"' in page  # the rest as typed
    assert 'value="Europe/Berlin"' in page
    assert "bad" not in config.get_settings()["notifications"]["channels"]
    assert vault.read_secret("NOTIFY_BAD_URL") is None


def test_a_channel_is_tested_and_removed_with_its_url():
    client, _plain = logged_in()
    assert client.post("/settings/notifications", CHANNEL_FORM).status_code == 302
    tested = client.post("/settings/notifications/test", {"channel": "ops"}, HTTP_ACCEPT="application/json")
    answer = tested.json()
    assert answer["result"]["sent"] is False  # nothing listens on port 1
    assert answer["result"]["error"]
    assert answer["message"].startswith("The test message to ops failed:")

    assert client.post("/settings/notifications/delete", {"name": "ops"}).status_code == 302
    assert config.get_settings()["notifications"]["channels"] == {}
    assert vault.read_secret("NOTIFY_OPS_URL") is None
    assert "No channels yet." in client.get("/settings/notifications").content.decode()


def test_an_agent_token_can_neither_see_nor_change_the_channels():
    client, _plain = logged_in(TokenScope.AGENT)
    assert client.get("/settings/notifications").status_code == 403
    assert client.post("/settings/notifications", CHANNEL_FORM).status_code == 403
    assert config.get_settings()["notifications"]["channels"] == {}
    assert vault.read_secret("NOTIFY_OPS_URL") is None


@engine
def test_a_sandbox_offers_the_actions_its_state_allows_and_asks_before_stop_and_delete():
    """Issue #37: Start and Stop were offered whatever the state; Stop ran without asking."""
    sandbox = make_sandbox()
    client, _plain = logged_in()

    def actions(state: str) -> dict[str, str]:
        Sandbox.objects.filter(pk=sandbox.pk).update(state=state)
        page = client.get(f"/sandboxes/{sandbox.id}/").content.decode()
        forms = re.findall(rf'<form method="post" action="/sandboxes/{sandbox.id}/do/(\w+)"([^>]*)>', page)
        return {action: attributes for action, attributes in forms}

    running = actions("running")
    assert " hidden" in running["start"]
    assert " hidden" not in running["stop"]
    assert "its agents stop with it" in running["stop"].lower()
    assert "are lost" in running["delete"]
    stopped = actions("stopped")
    assert " hidden" not in stopped["start"]
    assert " hidden" in stopped["stop"]
    missing = actions("missing")
    assert " hidden" in missing["start"]
    assert " hidden" in missing["stop"]


@engine
def test_a_sandbox_is_renamed_from_its_page_and_over_rpc_and_a_taken_or_bad_name_is_refused():
    """Issue #37: names people use, renamable; the id stays what the API knows it by."""
    from cocoon.actors import SYSTEM_ACTOR
    from cocoon.errors import InvalidParams
    from cocoon.registry import registry

    sandbox, other = make_sandbox("build"), make_sandbox("web")
    client, _plain = logged_in()
    page = f"/sandboxes/{sandbox.id}/"
    renamed = client.post(
        f"{page}do/rename", {"name": "frontend"}, HTTP_REFERER=f"http://testserver{page}", follow=True
    )
    assert "Renamed." in renamed.content.decode()
    assert Sandbox.objects.get(pk=sandbox.pk).name == "frontend"
    taken = client.post(
        f"{page}do/rename", {"name": "web"}, HTTP_REFERER=f"http://testserver{page}", follow=True
    )
    assert "A sandbox named web exists already." in taken.content.decode()
    assert Sandbox.objects.get(pk=other.pk).name == "web"
    answer = registry.dispatch("sandbox.rename", {"sandboxId": sandbox.id, "name": "api"}, SYSTEM_ACTOR, "en")
    assert (answer["id"], answer["name"]) == (sandbox.id, "api")
    with pytest.raises(InvalidParams) as bad:
        registry.dispatch("sandbox.rename", {"sandboxId": sandbox.id, "name": "-no"}, SYSTEM_ACTOR, "en")
    assert bad.value.render()["code"] == "invalid_params"


@engine
def test_an_agent_is_shown_by_its_name_and_renamed_from_its_page():
    """Issue #37: the card, the agent's page and its task's steps name it; the id is the link's and the
    tooltip's."""
    sandbox = make_sandbox("build")
    agent = Agent.objects.create(sandbox=sandbox, profile="shell", status="idle", name="fix the login")
    client, _plain = logged_in()
    dashboard = client.get("/").content.decode()
    card = dashboard[dashboard.index(f'data-agent="{agent.id}"') :]
    assert f'title="{agent.id}" data-field="name">fix the login</a>' in card
    page = f"/agents/{agent.id}/"
    renamed = client.post(
        f"{page}do/rename", {"name": "login fix"}, HTTP_REFERER=f"http://testserver{page}", follow=True
    )
    assert "Renamed." in renamed.content.decode()
    assert "<title>login fix" in renamed.content.decode()
    assert Agent.objects.get(pk=agent.pk).name == "login fix"
    blank = client.post(
        f"{page}do/rename", {"name": " "}, HTTP_REFERER=f"http://testserver{page}", follow=True
    )
    assert blank.status_code == 200
    assert "Renamed." not in blank.content.decode()
    assert Agent.objects.get(pk=agent.pk).name == "login fix"


@engine
def test_a_card_answers_only_the_question_it_showed():
    """Issue #37: the card's answer names the blocked status it saw; one that changed since, or an agent
    no longer blocked, gets nothing sent and says so."""
    sandbox = make_sandbox("build")
    agent = Agent.objects.create(sandbox=sandbox, profile="shell", status="blocked", name="asker")
    client, _plain = logged_in()
    dashboard = client.get("/").content.decode()
    card = dashboard[dashboard.index(f'data-agent="{agent.id}"') :]
    seen = re.search(r'name="seen" value="([^"]+)"', card).group(1)
    assert 'name="answer" value="0"' in card  # the profile's answers (y Enter, ...)
    fresh = client.get(f"/agents/{agent.id}/card").content.decode()
    assert fresh.lstrip().startswith(f'<li class="card status-blocked" data-agent="{agent.id}">')
    assert f'value="{seen}"' in fresh

    def answer(**form: str) -> dict:
        return client.post(f"/agents/{agent.id}/answer", form, HTTP_ACCEPT="application/json").json()

    changed = answer(seen="2020-01-01T00:00:00+00:00", answer="0")
    assert changed["error"]["code"] == "conflict"
    assert "The question has changed" in changed["error"]["message"]
    assert answer(seen=seen)["error"]["code"] == "invalid_params"  # neither an answer nor a reply
    Agent.objects.filter(pk=agent.pk).update(status="working")
    assert answer(seen=seen, answer="0")["error"]["code"] == "conflict"


@engine
def test_the_lists_search_and_filter_by_status_profile_and_node():
    """Issue #37: every list has a search box and filters, offering what the list holds, in words."""
    build, web = make_sandbox("build"), make_sandbox("web")
    Sandbox.objects.filter(pk=web.pk).update(
        state="stopped", node="nd_other", repo="https://forge.invalid/shop"
    )
    fixer = Agent.objects.create(sandbox=build, profile="shell", status="blocked", name="fix the login")
    writer = Agent.objects.create(sandbox=web, profile="codex", status="idle", name="write the docs")
    client, _plain = logged_in()

    def shown(path: str) -> tuple[list[str], str]:
        page = client.get(path).content.decode()
        return re.findall(r'data-(?:agent|sandbox)="([^"]+)"', page), page

    listed, page = shown("/agents/?q=LOGIN")
    assert (listed, "data-partial" in page) == ([fixer.id], True)  # a filtered wall is not added to live
    assert '<option value="blocked" >waits for you</option>' in page  # the statuses it holds, in words
    assert shown("/agents/?profile=codex")[0] == [writer.id]
    assert shown("/agents/?node=nd_other")[0] == [writer.id]
    assert shown("/agents/?q=web")[0] == [writer.id]  # by its sandbox's name
    assert shown("/agents/?status=blocked&profile=codex")[0] == []
    everything, page = shown("/agents/")
    assert (sorted(everything), "data-partial" in page) == (sorted([fixer.id, writer.id]), False)
    assert shown("/sandboxes/?q=shop")[0] == [web.id]
    assert shown("/sandboxes/?state=stopped")[0] == [web.id]
    task_id = in_review("ship the release")
    tasks = client.get("/tasks/?status=review").content.decode()
    assert f'data-task="{task_id}"' in tasks
    assert f'data-task="{task_id}"' not in client.get("/tasks/?q=nothing-like-it").content.decode()


@engine
def test_the_create_form_keeps_what_was_sent_shows_each_error_at_its_field_and_what_cannot_work_disabled():
    """Issue #37: a bad value comes back at its field with the input kept; an unbuilt image, a runtime
    not installed and a network above the token's ceilings are offered disabled with why; limits say
    their range."""
    from cocoon import tokens

    client, _plain = logged_in()
    before = Sandbox.objects.count()
    sent = {
        "name": "my-box",
        "repo": "https://forge.invalid/a.git",
        "cpus": "0",
        "memoryMb": "32",
        "pids": "64",
    }
    refused = client.post("/sandboxes/", sent)
    assert refused.status_code == 400
    page = refused.content.decode()
    assert Sandbox.objects.count() == before  # nothing made
    assert 'name="name" value="my-box"' in page
    assert 'value="https://forge.invalid/a.git"' in page
    assert 'name="pids" type="number" min="16"  value="64"' in page
    cpus = page[page.index('id="sb-cpus"') : page.index('id="sb-memory"')]
    assert 'class="field-error" role="alert"' in cpus
    memory = page[page.index('id="sb-memory"') : page.index('id="sb-pids"')]
    assert 'class="field-error" role="alert"' in memory
    assert "at least 64" in memory
    # The runtimes the engine lacks, each disabled with why (this engine has runsc registered).
    assert re.search(r'<option value="kata-fc" disabled>kata-fc — not installed in the engine</option>', page)

    _token, plain = tokens.create_token(
        "narrow", TokenScope.AGENT, ceilings={"networks": ["none", "egress"], "cpus": 2, "memoryMb": 2048}
    )
    narrow = type(client)()
    assert narrow.post("/login", {"token": plain}).status_code == 302
    form = narrow.get("/sandboxes/").content.decode()
    assert '<option value="open" disabled>open — above your token\'s ceilings</option>' in form
    assert 'max="2"' in form
    assert "0.5 to 2" in form
    assert "64 to 2048" in form
