"""The attention feed and its notifications, on the real code paths: items follow what agents, tasks
and schedules publish; channels are saved with their secrets in the vault; deliveries reach a real SMTP
server, a signed-webhook receiver and a chat-webhook stand-in on loopback, with retries for the ones
that fail. (The answer link end to end, in Chromium against a live agent: test_attention_e2e.)"""

import re
import secrets
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from agents import services as agent_services
from agents.models import Agent
from attention import answers, feed, links, notify
from attention.choices import DeliveryState, ItemState
from attention.models import Delivery, Item
from cocoon import config, system, vault
from cocoon.actors import SYSTEM_ACTOR, Actor
from cocoon.choices import AttentionKind, TokenScope
from cocoon.errors import CocoonError, Conflict, InvalidParams
from cocoon.models import ActivityEntry
from cocoon.registry import registry
from sandboxes.models import Sandbox
from scheduling.events import publish_task_updated
from scheduling.models import Schedule, Task
from tests.attention_receivers import http_receiver, smtp_server, text_of, verify_signature
from tests.conftest import free_port

pytestmark = pytest.mark.django_db(transaction=True)

AGENT_ACTOR = Actor(token_id="t", name="steering agent", scope=TokenScope.AGENT)
QUESTION = "Continue? [y/n] "


def call(method: str, params: dict, actor: Actor = SYSTEM_ACTOR):
    return registry.dispatch(method, params, actor, "en")


def make_agent(name: str = "s1", **fields) -> Agent:
    sandbox = Sandbox.objects.create(name=name, image="i", network="none", cpus=1, memory_mb=64, pids=16)
    return Agent.objects.create(sandbox=sandbox, profile="shell", status="working", **fields)


def set_status(agent: Agent, status: str, **fields) -> Agent:
    """What the poller does when it decides a new status: save it and publish agent.updated."""
    with transaction.atomic():
        for name, value in {"status": status, **fields}.items():
            setattr(agent, name, value)
        agent.save()
        agent_services.publish(agent)
    return agent


def blocked(agent: Agent) -> Agent:
    screen = f"$ ./deploy.sh\nBuilding...\n{QUESTION}"
    return set_status(agent, "blocked", last_screen=screen, screen_question=r"\? *[\[(][yY]/[nN][\])] *$")


def items(**filters) -> list[Item]:
    return list(Item.objects.filter(**filters))


def add_channel(name: str, **channel) -> dict:
    return call("settings.update", {"notifications": {"channels": {name: channel}}})


# -- the feed ------------------------------------------------------------------------------------------


def test_a_blocked_agent_is_an_item_with_its_question_and_the_item_closes_when_it_goes_on():
    agent = blocked(make_agent())
    [item] = items(agent_id=agent.id)
    assert (item.kind, item.state, item.detail) == (
        AttentionKind.AGENT_BLOCKED,
        ItemState.OPEN,
        QUESTION.strip(),
    )
    assert item.sandbox_id == agent.sandbox_id
    [listed] = call("attention.list", {})
    assert listed["id"] == item.id
    assert "waits for an answer" in listed["title"]
    # The poller sees it blocked again: still one item.
    blocked(agent)
    assert len(items(agent_id=agent.id)) == 1

    set_status(agent, "working")
    item.refresh_from_db()
    assert item.state == ItemState.CLOSED
    assert item.closed_at is not None
    assert call("attention.list", {}) == []
    assert [found["id"] for found in call("attention.list", {"state": "all"})] == [item.id]


@pytest.mark.parametrize(
    ("status", "fields", "kind"),
    [
        ("done", {}, AttentionKind.AGENT_DONE),
        ("exited", {"exit_reason": "exited", "exit_code": 3}, AttentionKind.AGENT_EXITED),
        ("exited", {"exit_reason": "engine_restarted"}, AttentionKind.AGENT_EXITED),
        ("exited", {"exit_reason": "exited", "exit_code": 0}, None),  # it ended by itself, well
        ("exited", {"exit_reason": "killed"}, None),  # a person ended it
        ("idle", {}, None),
    ],
)
def test_which_agent_states_need_a_human(status, fields, kind):
    agent = set_status(make_agent(), status, **fields)
    assert [item.kind for item in items(agent_id=agent.id)] == ([kind] if kind else [])


def test_a_task_in_review_or_failed_is_an_item_until_it_is_approved_or_run_again():
    task = Task.objects.create(title="fix the flaky test", prompt="p", workflow=[], status="review")
    publish_task_updated(task)
    [review] = items(task_id=task.id)
    assert review.kind == AttentionKind.TASK_REVIEW
    assert "fix the flaky test" in feed.title_params(review)["title"]
    task.status = "done"
    publish_task_updated(task)
    review.refresh_from_db()
    assert review.state == ItemState.CLOSED
    task.status = "failed"
    publish_task_updated(task)
    assert [item.kind for item in items(task_id=task.id, state=ItemState.OPEN)] == [AttentionKind.TASK_FAILED]


def test_a_schedule_that_could_not_start_a_run_is_an_item_until_it_starts_one():
    from cocoon import activity

    schedule = Schedule.objects.create(name="nightly", cron="0 3 * * *", template={})
    activity.record(
        "schedule.run_failed", {"name": "nightly", "schedule": schedule.id, "error": "no profile x"}
    )
    [item] = items(schedule_id=schedule.id)
    assert (item.kind, item.detail) == (AttentionKind.SCHEDULE_FAILED, "no profile x")
    run = Task.objects.create(
        title="nightly run", prompt="p", workflow=[], schedule=schedule, status="running"
    )
    publish_task_updated(run)
    item.refresh_from_db()
    assert item.state == ItemState.CLOSED


def test_the_setup_checklist_is_an_item_only_admins_see():
    item = feed.check_setup()  # no admin token exists in this database: the checklist is red
    assert item is not None
    assert item.kind == AttentionKind.SETUP
    assert "adminToken" in item.params["checks"]
    assert [found["id"] for found in call("attention.list", {})] == [item.id]
    assert call("attention.list", {}, AGENT_ACTOR) == []
    with pytest.raises(CocoonError) as error:
        call("attention.ack", {"itemId": item.id}, AGENT_ACTOR)
    assert error.value.code == "not_found"


def test_ack_and_snooze():
    agent = blocked(make_agent())
    [item] = items(agent_id=agent.id)
    snoozed = call("attention.snooze", {"itemId": item.id, "minutes": 30}, AGENT_ACTOR)
    assert snoozed["snoozedUntil"]
    assert call("attention.list", {}) == []
    Item.objects.filter(pk=item.id).update(snoozed_until=timezone.now() - timedelta(seconds=1))
    assert [found["id"] for found in call("attention.list", {})] == [item.id]  # its time has come

    acked = call("attention.ack", {"itemId": item.id}, AGENT_ACTOR)
    assert (acked["state"], acked["ackedBy"]) == ("acked", "steering agent (t)")
    assert call("attention.list", {}) == []
    assert len(call("attention.list", {"state": "acked"})) == 1
    assert ActivityEntry.objects.filter(key="attention.acked").exists()
    with pytest.raises(Conflict):
        call("attention.snooze", {"itemId": item.id, "minutes": 5})
    set_status(agent, "working")  # the cause goes away: closed, and an ack says so
    with pytest.raises(Conflict):
        call("attention.ack", {"itemId": item.id})


# -- channels in the settings --------------------------------------------------------------------------


def test_a_channel_url_goes_to_the_vault_and_is_never_returned():
    document = add_channel("ops", type="apprise", url="ntfy://alice:s3cret-pass@127.0.0.1:1/cocoon")
    channel = document["notifications"]["channels"]["ops"]
    assert "url" not in channel
    assert "s3cret-pass" not in str(document)
    assert channel["urlPreview"].startswith("ntfy://alice:")
    assert "127.0.0.1" in channel["urlPreview"]
    assert vault.read_secret("NOTIFY_OPS_URL") == "ntfy://alice:s3cret-pass@127.0.0.1:1/cocoon"
    assert "s3cret-pass" not in str(call("settings.get", {}))
    # A change of its rules keeps the URL.
    add_channel("ops", kinds=["agent_blocked"])
    assert vault.read_secret("NOTIFY_OPS_URL") == "ntfy://alice:s3cret-pass@127.0.0.1:1/cocoon"
    call("settings.reset", {"keys": ["notifications.channels.ops"]})
    assert vault.read_secret("NOTIFY_OPS_URL") is None


@pytest.mark.parametrize(
    ("channel", "path", "code"),
    [
        ({"type": "apprise", "url": "nope://x"}, "notifications.channels.bad.url", "invalid_url"),
        (
            {"type": "apprise", "url": "https://example.invalid/x"},
            "notifications.channels.bad.url",
            "invalid_url",
        ),
        (
            {"type": "webhook", "url": "file:///etc/passwd", "secret": "s" * 32},
            "notifications.channels.bad.url",
            "invalid_url",
        ),
        (
            {"type": "webhook", "url": "http://127.0.0.1:1/hook"},
            "notifications.channels.bad.secret",
            "required",
        ),
        ({"type": "apprise"}, "notifications.channels.bad.url", "required"),
        (
            {
                "type": "apprise",
                "url": "json://127.0.0.1:1/",
                "quietHours": {"from": "22:00", "to": "07:00", "timezone": "Mars/Base"},
            },
            "notifications.channels.bad.quietHours.timezone",
            "unknown_timezone",
        ),
    ],
)
def test_a_bad_channel_is_refused_at_save_with_a_field_error_and_nothing_is_kept(channel, path, code):
    with pytest.raises(InvalidParams) as error:
        add_channel("bad", **channel)
    fields = error.value.render()["details"]["fields"]
    assert [(field["path"], field["code"]) for field in fields] == [(path, code)]
    assert "bad" not in config.get_settings()["notifications"]["channels"]
    assert vault.read_secret("NOTIFY_BAD_URL") is None
    assert vault.read_secret("NOTIFY_BAD_SECRET") is None


# -- deliveries ----------------------------------------------------------------------------------------


def deliver_all() -> dict[str, str]:
    """Run every due delivery as the Celery task would: {channel: state}."""
    return {
        delivery.channel: notify.deliver(delivery.id)
        for delivery in Delivery.objects.filter(state=DeliveryState.SCHEDULED, due_at__lte=timezone.now())
    }


def test_an_item_reaches_email_a_signed_webhook_and_a_chat_webhook_and_a_dead_channel_is_retried_apart():
    secret = secrets.token_urlsafe(24)
    with http_receiver() as hooks, http_receiver() as chat, smtp_server() as smtp:
        add_channel("mail", type="apprise", url=smtp.url())
        add_channel("hook", type="webhook", url=f"{hooks.url}/cocoon", secret=secret)
        add_channel("chat", type="apprise", url=f"ntfy://127.0.0.1:{chat.port}/agents")
        add_channel("dead", type="apprise", url=f"json://127.0.0.1:{free_port()}/gone")
        agent = blocked(make_agent("build-box"))
        [item] = items(agent_id=agent.id)

        assert deliver_all() == {"mail": "sent", "hook": "sent", "chat": "sent", "dead": "scheduled"}

        body = verify_signature(hooks.requests[0], secret)
        assert body["type"] == "attention.item"
        assert body["item"]["id"] == item.id
        assert body["item"]["detail"] == QUESTION.strip()
        assert body["link"].startswith("http://127.0.0.1:")
        assert links.resolve(body["link"].rsplit("/a/", 1)[1]) == item
        tampered = hooks.requests[0]
        tampered.body = tampered.body.replace(b"build-box", b"evil-box")
        with pytest.raises(AssertionError, match="bad signature"):
            verify_signature(tampered, secret)

        [mail] = smtp.messages
        assert "waits for an answer" in mail["Subject"]
        # Each notification signs its own link (a second apart, they differ): the mail's opens the item too.
        mailed = re.search(r"/a/(\S+)", text_of(mail))
        assert mailed is not None
        assert links.resolve(mailed.group(1)) == item
        assert chat.requests[0].path == "/"
        assert chat.requests[0].json()["topic"] == "agents"
        assert QUESTION.strip() in chat.requests[0].json()["message"]

    dead = Delivery.objects.get(channel="dead")
    assert (dead.state, dead.attempts) == (DeliveryState.SCHEDULED, 1)
    assert "error" in dead.error.lower()
    assert dead.due_at > timezone.now()
    log = call("notifications.deliveries", {"itemId": item.id})
    assert {entry["channel"]: entry["state"] for entry in log} == {
        "mail": "sent",
        "hook": "sent",
        "chat": "sent",
        "dead": "scheduled",
    }
    for _attempt in range(notify.MAX_ATTEMPTS - 1):
        Delivery.objects.filter(pk=dead.pk).update(due_at=timezone.now())
        notify.deliver(dead.id)
    dead.refresh_from_db()
    assert (dead.state, dead.attempts) == (DeliveryState.FAILED, notify.MAX_ATTEMPTS)


def test_a_channel_delay_lets_a_short_block_pass_and_quiet_hours_hold_a_message_until_they_end():
    with http_receiver() as hooks:
        add_channel("patient", type="webhook", url=hooks.url, secret="s" * 32, delayS=60)
        agent = blocked(make_agent())
        delivery = Delivery.objects.get()
        assert delivery.due_at >= delivery.item.opened_at + timedelta(seconds=60)
        assert notify.deliver(delivery.id) is None  # not due
        set_status(agent, "working")  # answered within the minute
        delivery.refresh_from_db()
        assert delivery.state == DeliveryState.SKIPPED
        assert hooks.requests == []

        now = timezone.now()
        start, end = (
            (now - timedelta(hours=1)).strftime("%H:%M"),
            (now + timedelta(hours=1)).strftime("%H:%M"),
        )
        add_channel("patient", delayS=0, quietHours={"from": start, "to": end, "timezone": "UTC"})
        blocked(agent)
        waiting = Delivery.objects.get(state=DeliveryState.SCHEDULED)
        assert notify.deliver(waiting.id) == DeliveryState.SCHEDULED
        waiting.refresh_from_db()
        assert waiting.due_at > now + timedelta(minutes=50)
        assert waiting.attempts == 0
        assert hooks.requests == []


def test_a_channel_hears_only_its_kinds_and_sandboxes():
    add_channel(
        "builds", type="apprise", url="json://127.0.0.1:1/", kinds=["agent_blocked"], sandboxes=["build-box"]
    )
    blocked(make_agent("build-box"))
    blocked(make_agent("other-box"))
    set_status(make_agent("build-box-2"), "done")
    assert [delivery.item.sandbox_id for delivery in Delivery.objects.all()] == [
        Sandbox.objects.get(name="build-box").id
    ]


def test_notifications_test_says_whether_the_channel_took_it():
    with http_receiver() as hooks, http_receiver(status=500) as broken:
        add_channel("good", type="webhook", url=hooks.url, secret="s" * 32)
        add_channel("broken", type="webhook", url=broken.url, secret="s" * 32)
        assert call("notifications.test", {"channel": "good"})["sent"] is True
        assert verify_signature(hooks.wait()[0], "s" * 32)["type"] == "notifications.test"
        result = call("notifications.test", {"channel": "broken"})
        assert (result["sent"], result["error"]) == (False, "HTTP 500")
    with pytest.raises(CocoonError) as error:
        call("notifications.test", {"channel": "nope"})
    assert error.value.code == "not_found"


def test_deliveries_whose_celery_message_was_lost_are_handed_over_again():
    add_channel("hook", type="webhook", url="http://127.0.0.1:1/", secret="s" * 32)
    blocked(make_agent())
    Delivery.objects.update(due_at=timezone.now() - timedelta(minutes=5))
    assert notify.resend_lost() == 1


# -- the answer link -----------------------------------------------------------------------------------


def test_an_answer_link_opens_only_its_own_item_and_refuses_forged_expired_and_used_ones():
    agent = blocked(make_agent())
    [item] = items(agent_id=agent.id)
    url = links.make(item)
    path = url.removeprefix(system.public_url())
    page = Client().get(path)
    assert page.status_code == 200
    assert QUESTION.strip() in page.content.decode()
    assert "y Enter" in page.content.decode()  # the shell profile's answers

    token = path.rsplit("/", 1)[1]
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert Client().get(f"/a/{forged}").status_code == 403
    other = blocked(make_agent("s2"))
    [other_item] = items(agent_id=other.id)
    assert links.resolve(links.make(other_item).rsplit("/", 1)[1]) == other_item != item

    with links.use(item):  # what an answer does
        pass
    used = Client().get(path)
    assert used.status_code == 403
    assert "used already" in used.content.decode()

    config.update_settings({"notifications": {"linkMinutes": 5}}, actor=SYSTEM_ACTOR)
    fresh = links.make(item).rsplit("/", 1)[1]
    with pytest.MonkeyPatch.context() as patch:
        later = timezone.now().timestamp() + 6 * 60
        patch.setattr("django.core.signing.time.time", lambda: later)
        assert Client().get(f"/a/{fresh}").status_code == 403


def test_a_failed_answer_gives_the_link_back_and_a_second_answer_through_the_same_link_is_refused():
    agent = blocked(make_agent())  # its sandbox row has no container: sending the keys fails
    [item] = items(agent_id=agent.id)
    path = links.make(item).removeprefix(system.public_url())
    seen = answers.question(item).fingerprint
    failed = Client().post(path, {"answer": "0", "seen": seen})
    assert failed.status_code == 200
    assert "not running" in failed.content.decode()  # the sandbox's own error, shown
    assert Client().get(path).status_code == 200  # still works
    for bad in ("9", "²", "-1"):  # none of the answers shown, and no reply: nothing is used
        refused = Client().post(path, {"answer": bad, "seen": seen}).content.decode()
        assert 'role="alert"' in refused
    assert Client().get(path).status_code == 200

    same = Item.objects.get(pk=item.pk)  # two answers at once: both opened the page first
    with links.use(item), pytest.raises(links.LinkInvalid), links.use(same):
        pass
    assert Client().get(path).status_code == 403


def test_what_a_sandbox_prints_reaches_a_mail_as_plain_text():
    hostile = (
        '<a href="http://evil.invalid/a/x">approve</a> \x1b]8;;http://evil.invalid\x07link\x1b]8;;\x07 [y/n]'
    )
    with smtp_server() as smtp:
        add_channel("mail", type="apprise", url=smtp.url())
        agent = set_status(make_agent(), "blocked", last_screen=hostile, screen_question=r"\[y/n\]")
        [item] = items(agent_id=agent.id)
        assert "\x1b" not in item.detail
        assert "\x07" not in item.detail
        assert deliver_all() == {"mail": "sent"}
        [mail] = smtp.messages
    html = mail.get_body(preferencelist=("html",))
    assert html is None or '<a href="http://evil.invalid' not in html.get_content()
    assert '<a href="http://evil.invalid/a/x">' in text_of(mail)  # shown as the text it is


def test_a_deleted_sandbox_closes_the_items_of_its_agents():
    from cocoon import events

    agent = set_status(make_agent(), "exited", exit_reason="engine_restarted")
    [item] = items(agent_id=agent.id)
    with transaction.atomic():
        events.publish("sandbox.deleted", {"id": agent.sandbox_id}, sandbox_id=agent.sandbox_id)
    item.refresh_from_db()
    assert item.state == ItemState.CLOSED


def test_a_dead_channel_is_tried_once_per_retry_not_once_per_item():
    add_channel("dead", type="apprise", url=f"json://127.0.0.1:{free_port()}/gone")
    for name in ("a", "b", "c"):
        blocked(make_agent(name))
    assert set(deliver_all().values()) == {DeliveryState.SCHEDULED}
    tried = Delivery.objects.filter(attempts=1)
    waiting = Delivery.objects.filter(attempts=0, error=notify.FAILING)
    assert (tried.count(), waiting.count()) == (1, 2)
    assert all(delivery.due_at > tried.get().due_at for delivery in waiting)


def test_an_answer_to_a_question_that_changed_since_the_page_was_opened_is_refused():
    agent = blocked(make_agent())
    [item] = items(agent_id=agent.id)
    path = links.make(item).removeprefix(system.public_url())
    seen = answers.question(item).fingerprint
    set_status(agent, "blocked", last_screen="rm -rf /workspace? [y/n] ")  # a new question, same item
    page = Client().post(path, {"answer": "0", "seen": seen}).content.decode()
    assert "question has changed" in page
    assert "rm -rf /workspace? [y/n]" in page
    assert Client().get(path).status_code == 200  # the link was not used


def test_a_delivery_that_fails_in_an_unexpected_way_counts_as_an_attempt_and_the_next_waits_for_its_retries():
    add_channel("hook", type="webhook", url="http://127.0.0.1:1/", secret="s" * 32)
    # Changed behind the settings' back (secrets.set): httpx refuses it with InvalidURL, no HTTPError.
    vault.set_secret("NOTIFY_HOOK_URL", "http://[::1/", actor=SYSTEM_ACTOR)
    blocked(make_agent("a"))
    blocked(make_agent("b"))
    assert set(deliver_all().values()) == {DeliveryState.SCHEDULED}
    tried = Delivery.objects.get(attempts=1)
    assert "InvalidURL" in tried.error
    for _round in range(notify.MAX_ATTEMPTS):  # the tried one is tried when due, up to the last attempt
        Delivery.objects.update(due_at=timezone.now())
        deliver_all()
    tried.refresh_from_db()
    assert (tried.state, tried.attempts) == (DeliveryState.FAILED, notify.MAX_ATTEMPTS)
    # ... then the other one is no longer held up by it.
    assert Delivery.objects.exclude(pk=tried.pk).get().attempts >= 1
    assert not Delivery.objects.filter(state=DeliveryState.SENDING).exists()


def test_a_channel_that_changes_its_type_needs_its_url_again():
    add_channel("ops", type="apprise", url="json://127.0.0.1:1/")
    with pytest.raises(InvalidParams) as error:
        add_channel("ops", type="webhook", secret="s" * 32)
    fields = error.value.render()["details"]["fields"]
    assert [(field["path"], field["code"]) for field in fields] == [
        ("notifications.channels.ops.url", "required")
    ]
    assert vault.read_secret("NOTIFY_OPS_SECRET") is None  # nothing of the refused update is kept


def test_a_config_file_puts_channel_urls_in_the_vault_and_cannot_set_what_only_cocoon_sets(tmp_path):
    from cocoon import setup
    from cocoon.models import SettingsDocument

    SettingsDocument.objects.all().delete()
    forged = tmp_path / "forged.yaml"
    forged.write_text("notifications: {channels: {ops: {type: apprise, urlPreview: 'json://x'}}}\n")
    with pytest.raises(InvalidParams):
        setup.first_run(forged)
    assert setup.is_first_run()
    config_file = tmp_path / "cocoon.yaml"
    config_file.write_text(
        "notifications: {channels: {ops: {type: apprise, url: 'ntfy://u:pw@127.0.0.1:1/t'}}}\n"
    )
    assert setup.first_run(config_file)
    assert vault.read_secret("NOTIFY_OPS_URL") == "ntfy://u:pw@127.0.0.1:1/t"
    assert "pw@" not in str(SettingsDocument.objects.get().overrides)
    assert (
        config.get_settings()["notifications"]["channels"]["ops"]["urlPreview"]
        == "ntfy://u:****@127.0.0.1:1/…"
    )


def test_an_agent_still_blocked_after_an_answer_from_its_link_is_sent_again_with_a_new_link(monkeypatch):
    monkeypatch.setattr(feed, "ASKED_AGAIN_AFTER", timedelta(0))
    with http_receiver() as hooks:
        add_channel("hook", type="webhook", url=hooks.url, secret="s" * 32)
        agent = blocked(make_agent())
        assert deliver_all() == {"hook": "sent"}
        [item] = items(agent_id=agent.id)
        with links.use(item):  # answered ("x": not what it takes) ...
            pass
        blocked(agent)  # ... and it asks again
        assert deliver_all() == {"hook": "sent"}
        first, second = (request.json()["link"] for request in hooks.requests)
    assert first != second
    assert Client().get(first.removeprefix(system.public_url())).status_code == 403
    assert Client().get(second.removeprefix(system.public_url())).status_code == 200
    blocked(agent)  # a screen move with no answer in between sends nothing more
    assert Delivery.objects.filter(state=DeliveryState.SCHEDULED).count() == 0


def test_a_retry_is_tried_when_due_even_while_another_retry_of_its_channel_waits():
    """Two failed deliveries of one channel each wait for their own retry: before, each waited behind the
    other's later retry, pushing it on forever, and neither was tried again."""
    add_channel("dead", type="apprise", url=f"json://127.0.0.1:{free_port()}/gone")
    blocked(make_agent("a"))
    blocked(make_agent("b"))
    first, second = Delivery.objects.order_by("created_at")
    Delivery.objects.filter(pk=first.pk).update(attempts=1, due_at=timezone.now())
    Delivery.objects.filter(pk=second.pk).update(attempts=1, due_at=timezone.now() + timedelta(seconds=60))
    assert notify.deliver(first.id) == DeliveryState.SCHEDULED
    first.refresh_from_db()
    assert first.attempts == 2  # tried, not put behind the other
