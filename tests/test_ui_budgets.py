"""Budgets in the web UI: every budget on the Usage page, and a sandbox's (an agent's, a task's) budget on
its page with an admin's form to set or remove it, through Django's test client against the real methods
and records ingested as the credential proxy writes them."""

import re

import pytest

from agents.models import Agent
from cocoon import config
from cocoon.actors import SYSTEM_ACTOR
from cocoon.choices import TokenScope
from sandboxes.models import Sandbox
from scheduling.models import Task
from tests.test_ui import in_review, logged_in
from tests.test_usage import call, line, sandbox
from usage import ingest
from usage.models import BudgetState

pytestmark = pytest.mark.django_db


def section(page: str, marker: str, end: str) -> str:
    start = page.index(marker)
    return page[start : page.index(end, start)]


def budget_row(page: str, scope: str, subject: str) -> str:
    return section(page, f'data-budget="{scope}:{subject}"', "</tr>")


def budget_form(page: str) -> str:
    start = page.rindex("<form", 0, page.index('id="budget-form"'))
    return page[start : page.index("</form>", start)]


def test_the_usage_page_lists_a_spent_sandbox_budget_as_exceeded_with_what_was_spent_of_its_limit():
    box, thrifty = sandbox("build"), sandbox("thrifty")
    Sandbox.objects.filter(pk=box.pk).update(budget={"cost": 0.01, "tokens": 100_000, "onSpent": "stop"})
    Sandbox.objects.filter(pk=thrifty.pk).update(budget={"tokens": 1_000_000})
    ingest.ingest([line(box.id), line(box.id), line(thrifty.id)])  # 2 x 0.008325 USD, 5,500 tokens
    client, _plain = logged_in(TokenScope.AGENT)  # the list is everyone's

    page = client.get("/usage/").content.decode()
    row = budget_row(page, "sandbox", box.id)
    assert f'sandbox <a href="/sandboxes/{box.id}/">{box.id}</a>' in row
    assert "0.02 USD, 11000 tokens of 0.01 USD, 100000 tokens" in row
    assert '<span class="state budget-exceeded" data-budget-state>exceeded</span>' in row
    assert "refuse its requests and stop its agents" in row
    other = budget_row(page, "sandbox", thrifty.id)
    assert "5500 tokens of 1000000 tokens" in other
    assert '<span class="state budget-ok" data-budget-state>ok</span>' in other
    assert '<td data-field="onSpent">refuse its requests</td>' in other
    # The spent one first.
    assert re.findall(r'data-budget="sandbox:([^"]+)"', page) == [box.id, thrifty.id]


def test_todays_cap_is_listed_as_today_and_a_removed_sandboxs_budget_without_a_link():
    config.update_settings({"usage": {"dailyCap": 100}}, actor=SYSTEM_ACTOR)
    box = sandbox("gone")
    box_id = box.id
    Sandbox.objects.filter(pk=box_id).update(budget={"tokens": 10_000})
    ingest.ingest([line(box_id)])
    box.delete()  # its budget's last state stays
    client, _plain = logged_in()

    page = client.get("/usage/").content.decode()
    [day] = re.findall(r'data-budget="day:([^"]+)"', page)
    assert 'daily cap <a href="/settings/usage">today</a>' in budget_row(page, "day", day)
    assert "0.01 USD of 100.00 USD" in budget_row(page, "day", day)
    gone = budget_row(page, "sandbox", box_id)
    assert f'<code>{box_id}</code> <span class="muted">(removed)</span>' in gone
    assert "<a " not in gone


def test_an_admin_sets_a_sandboxs_budget_on_its_page_and_removes_it():
    box = sandbox("build")
    client, _plain = logged_in()
    page = client.get(f"/sandboxes/{box.id}/").content.decode()
    assert "No budget of its own." in page
    assert f'action="/sandboxes/{box.id}/budget"' in budget_form(page)
    assert "Remove budget" not in page  # nothing to remove

    response = client.post(
        f"/sandboxes/{box.id}/budget", {"cost": "2.5", "tokens": "", "onSpent": "stop"}, follow=True
    )
    assert response.redirect_chain == [(f"/sandboxes/{box.id}/", 302)]
    page = response.content.decode()
    assert "The budget was saved." in page
    assert call("sandbox.get", {"sandboxId": box.id})["budget"] == {"cost": 2.5, "onSpent": "stop"}
    assert Sandbox.objects.get(pk=box.pk).budget == {"cost": 2.5, "onSpent": "stop"}
    assert '<dd data-field="limit">2.50 USD</dd>' in page
    assert '<dd data-field="onSpent">refuse its requests and stop its agents</dd>' in page
    assert '<span class="state budget-ok" data-budget-state>ok</span>' in page  # judged at once
    form = budget_form(page)
    assert 'name="cost" value="2.5"' in form
    assert '<option value="stop" selected>' in form

    ingest.ingest([line(box.id)])
    page = client.get(f"/sandboxes/{box.id}/").content.decode()
    assert '<dd data-field="spent">0.01 USD <span class="state budget-ok"' in page

    response = client.post(f"/sandboxes/{box.id}/budget", {"remove": "1"}, follow=True)
    assert "The budget was removed." in response.content.decode()
    assert call("sandbox.get", {"sandboxId": box.id})["budget"] is None
    assert not BudgetState.objects.filter(subject=box.id).exists()
    assert "No budget of its own." in response.content.decode()


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"cost": "-1"}, "cost", "Must be more than 0."),
        ({"cost": "0"}, "cost", "Must be more than 0."),
        ({"tokens": "lots"}, "tokens", "Must be of type integer."),
        ({"tokens": "1.5"}, "tokens", "Must be of type integer."),
        ({}, "cost", "One of these fields is required: cost, tokens."),
    ],
)
def test_a_bad_value_comes_back_next_to_its_field_as_typed_and_nothing_is_saved(form, field, message):
    box = sandbox("build")
    Sandbox.objects.filter(pk=box.pk).update(budget={"tokens": 10_000})
    client, _plain = logged_in()

    response = client.post(
        f"/sandboxes/{box.id}/budget", {"cost": "", "tokens": "", "onSpent": "stop"} | form
    )
    assert response.status_code == 400
    page = response.content.decode()
    typed = budget_form(page)
    assert f'name="{field}" value="{form.get(field, "")}"' in typed
    assert f'aria-invalid="true" aria-describedby="e-budget-{field}"' in typed
    assert f'<p class="error" id="e-budget-{field}">{message}</p>' in typed
    assert '<option value="stop" selected>' in typed  # as chosen, not as saved
    assert f"<li><code>{field}</code>: {message}</li>" in page
    assert Sandbox.objects.get(pk=box.pk).budget == {"tokens": 10_000}
    assert '<dd data-field="limit">10000 tokens</dd>' in page  # what is saved


def test_an_agent_and_a_task_have_the_same_form_on_their_pages():
    box = sandbox("build")
    worker = Agent.objects.create(sandbox=box, profile="shell")
    task_id = in_review("spend a little")
    client, _plain = logged_in()

    for path, owner in (
        (f"/agents/{worker.id}/", Agent.objects.filter(pk=worker.id)),
        (f"/tasks/{task_id}/", Task.objects.filter(pk=task_id)),
    ):
        assert f'action="{path}budget"' in budget_form(client.get(path).content.decode())
        response = client.post(f"{path}budget", {"cost": "", "tokens": "5000", "onSpent": "refuse"})
        assert (response.status_code, response["Location"]) == (302, path)
        assert owner.get().budget == {"tokens": 5000, "onSpent": "refuse"}
        refused = client.post(f"{path}budget", {"cost": "", "tokens": "0", "onSpent": "refuse"})
        assert refused.status_code == 400
        assert '<p class="error" id="e-budget-tokens">Must be at least 1.</p>' in refused.content.decode()
        assert owner.get().budget == {"tokens": 5000, "onSpent": "refuse"}


def test_an_agent_token_sees_the_budget_but_no_form_and_may_not_post_it():
    box = sandbox("build")
    Sandbox.objects.filter(pk=box.pk).update(budget={"tokens": 10_000})
    client, _plain = logged_in(TokenScope.AGENT)

    page = client.get(f"/sandboxes/{box.id}/").content.decode()
    assert '<dd data-field="limit">10000 tokens</dd>' in page
    assert 'id="budget-form"' not in page
    assert "/budget" not in page
    response = client.post(f"/sandboxes/{box.id}/budget", {"cost": "1000", "onSpent": "refuse"})
    assert response.status_code == 403
    response = client.post(f"/sandboxes/{box.id}/budget", {"remove": "1"})
    assert response.status_code == 403
    assert Sandbox.objects.get(pk=box.pk).budget == {"tokens": 10_000}


def test_a_budget_post_is_a_post():
    box = sandbox("build")
    client, _plain = logged_in()
    assert client.get(f"/sandboxes/{box.id}/budget").status_code == 405
