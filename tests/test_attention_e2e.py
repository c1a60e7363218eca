"""Answer from the alert, end to end: a shell agent in a real sandbox asks y/n, cocoond mails the item to
a real SMTP server on loopback, headless Chromium opens the link from that mail and answers, and the
agent goes on with the answer."""

import asyncio
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.attention_receivers import smtp_server, text_of
from tests.conftest import CHROMIUM, wait_until
from tests.test_mcp import with_session
from tests.test_ui_browser import log_in

pytestmark = pytest.mark.e2e

ASK = 'read -p "Continue? [y/n] " a; echo "answer=$a" > /tmp/answer.txt'


@pytest.fixture
def sandbox(cocoond, sandbox_image) -> Iterator[dict]:
    created = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    yield created
    cocoond.post("sandbox.delete", {"sandboxId": created["id"]})


def test_a_blocked_shell_agent_is_answered_from_the_link_in_its_email(cocoond, sandbox):
    with smtp_server() as smtp, cocoond.ws() as ws:
        channel = {
            "type": "apprise",
            "url": smtp.url(),
            "kinds": ["agent_blocked"],
            "sandboxes": [sandbox["id"]],
        }
        cocoond.call("settings.update", {"notifications": {"channels": {"e2e-mail": channel}}})
        try:
            ws.call("events.subscribe", {"types": ["attention.updated"], "sandboxId": sandbox["id"]})
            agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell"})
            cocoond.call("agent.send_input", {"agentId": agent["id"], "text": ASK})
            waited = cocoond.call(
                "agent.wait", {"agentId": agent["id"], "until": ["blocked"], "timeoutS": 30}
            )
            assert waited["status"] == "blocked"
            [item] = cocoond.call("attention.list", {"sandboxId": sandbox["id"]})
            assert (item["kind"], item["detail"]) == ("agent_blocked", "Continue? [y/n]")
            event = ws.next_event()["event"]
            assert (event["type"], event["data"]["id"], event["agentId"]) == (
                "attention.updated",
                item["id"],
                agent["id"],
            )
            # A steering agent watches its workers over MCP with an agent token.
            steering = cocoond.call("tokens.create", {"name": "steering", "scope": "agent"})["token"]
            listed = asyncio.run(
                with_session(
                    cocoond,
                    steering,
                    lambda session: session.call_tool("attention_list", {"sandboxId": sandbox["id"]}),
                )
            )
            assert [found["id"] for found in listed.structured_content["result"]] == [item["id"]]

            [mail] = smtp.wait()
            link = re.search(r"http://127\.0\.0\.1:\d+/a/\S+", text_of(mail))
            assert link, text_of(mail)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                # Someone at the dashboard: the item comes first, the agent's card shows the question.
                dashboard = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
                log_in(dashboard, cocoond, cocoond.token)
                needs_you = dashboard.locator(f'[data-item="{item["id"]}"]')
                expect(needs_you).to_contain_text("waits for an answer")
                card = dashboard.locator(f'[data-agent="{agent["id"]}"]')
                expect(card.locator('[data-field="status"]')).to_have_text("waits for you")
                expect(card.locator('[data-field="rule"]')).to_have_text("a question on its screen")
                expect(card.locator('[data-field="screenTail"]')).to_contain_text("Continue? [y/n]")

                phone = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
                phone.goto(link.group(0))
                expect(phone.locator("#question")).to_have_text("Continue? [y/n]")
                expect(phone.locator("#screen")).to_contain_text("Continue? [y/n]")
                phone.get_by_role("button", name="y Enter").click()
                expect(phone.locator("#answered")).to_contain_text("Sent: y Enter")
                # The link was for one answer.
                assert phone.goto(link.group(0)).status == 403

                # The dashboard follows without a reload: the item is gone, the card is no longer blocked.
                expect(needs_you).to_have_count(0, timeout=20_000)
                expect(card.locator('[data-field="status"]')).not_to_have_text(
                    "waits for you", timeout=20_000
                )
                browser.close()

            def answered() -> str:
                result = cocoond.call(
                    "sandbox.exec", {"sandboxId": sandbox["id"], "command": ["cat", "/tmp/answer.txt"]}
                )
                return result["stdout"] if result["exitCode"] == 0 else ""

            assert wait_until(answered, timeout=20).strip() == "answer=y"
            wait_until(lambda: cocoond.call("attention.list", {"sandboxId": sandbox["id"]}) == [], timeout=20)
            [closed] = cocoond.call("attention.list", {"sandboxId": sandbox["id"], "state": "all"})
            assert closed["state"] == "closed"
            [delivery] = cocoond.call("notifications.deliveries", {"itemId": item["id"]})
            assert delivery["state"] == "sent"
        finally:
            cocoond.call("settings.reset", {"keys": ["notifications.channels.e2e-mail"]})


def test_the_dashboard_follows_a_new_agent_its_question_and_an_answer_from_its_card(
    start_cocoond, sandbox_image
):
    """Issue #37: the "Needs you" list and the wall follow the events without a reload, and a blocked
    agent is answered from its card with the answers of its profile. A server of its own: the shared
    one's dashboard holds other tests' items, and its wall may be paged (a paged wall is not added to)."""
    cocoond = start_cocoond()
    sandbox = cocoond.call("sandbox.create", {"network": "none", "image": sandbox_image})
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
        log_in(page, cocoond, cocoond.token)
        expect(page.locator("#live-state[data-live]")).to_have_count(1)
        expect(page.locator(".needs-you [data-empty]")).to_be_visible()
        page.evaluate("window.notReloaded = true")

        agent = cocoond.call("agent.spawn", {"sandboxId": sandbox["id"], "profile": "shell", "name": "asker"})
        card = page.locator(f'.card[data-agent="{agent["id"]}"]')
        expect(card.locator('[data-field="name"]')).to_have_text("asker", timeout=15_000)
        cocoond.call("agent.send_input", {"agentId": agent["id"], "text": ASK})
        expect(card.locator('[data-field="status"]')).to_have_text("waits for you", timeout=30_000)
        [item] = cocoond.call("attention.list", {"sandboxId": sandbox["id"]})
        listed = page.locator(f'[data-item="{item["id"]}"]')
        expect(listed).to_contain_text("Agent “asker” (shell)", timeout=15_000)
        expect(page.locator(".needs-you [data-empty]")).to_be_hidden()

        card.get_by_role("button", name="n Enter").click()
        expect(card.locator("[data-result]")).to_have_text("Sent: n Enter.")
        expect(listed).to_have_count(0, timeout=20_000)
        expect(card.locator('[data-field="status"]')).not_to_have_text("waits for you", timeout=20_000)
        expect(card.locator("form.card-answer")).to_have_count(0)
        assert page.evaluate("window.notReloaded") is True
        browser.close()

    def answered() -> str:
        result = cocoond.call(
            "sandbox.exec", {"sandboxId": sandbox["id"], "command": ["cat", "/tmp/answer.txt"]}
        )
        return result["stdout"] if result["exitCode"] == 0 else ""

    assert wait_until(answered, timeout=20).strip() == "answer=n"
