"""Settings → Usage: the currency, the daily cap, when to notify and the price table, through Django's
test client against the real settings service; and a saved price pricing what is ingested afterwards."""

import copy
from decimal import Decimal

import pytest
from django.test import Client

from cocoon import config, settings_defaults, settings_schema
from cocoon.choices import TokenScope
from cocoon.models import SettingsDocument
from tests.test_ui import logged_in
from tests.test_usage import line, sandbox
from ui.settings.prices import BLANK_PRICE_ROWS
from usage import ingest
from usage.models import UsageRecord

pytestmark = pytest.mark.django_db

DEFAULT_PRICES = settings_defaults.DEFAULTS["usage"]["prices"]
SONNET = next(index for index, entry in enumerate(DEFAULT_PRICES) if entry["model"] == "claude-sonnet-4*")


def form_of(response) -> dict[str, str]:
    """The page's form as a browser sends it back untouched."""
    form = {name: value for name, _label, value, _error in response.context["fields"]}
    for index, row in enumerate(response.context["rows"]):
        form |= {f"prices-{index}-{column}": value for column, value in row.values.items()}
        if row.remove:
            form[f"prices-{index}-remove"] = "on"
    return form


def opened() -> tuple[Client, dict[str, str]]:
    client, _plain = logged_in()
    return client, form_of(client.get("/settings/usage"))


def saved_usage() -> dict:
    return config.get_settings()["usage"]


def test_the_page_shows_the_usage_settings_and_the_default_prices_in_their_order():
    client, _plain = logged_in()
    response = client.get("/settings/usage")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'href="/settings/usage" aria-current="page">Usage</a>' in page
    assert '<a href="/usage/" aria-current="page">' not in page  # the sidebar marks Settings
    assert 'id="u-currency" name="currency" value="USD"' in page
    assert 'name="dailyCap" value="0"' in page
    assert 'name="notifyAt" value="0.8"' in page
    rows = response.context["rows"]
    assert len(rows) == len(DEFAULT_PRICES) + BLANK_PRICE_ROWS
    shown = [
        {"provider": row.values["provider"], "model": row.values["model"]}
        | {name: float(row.values[name]) for name in settings_schema.PRICE_FIELDS}
        for row in rows[: len(DEFAULT_PRICES)]
    ]
    assert shown == DEFAULT_PRICES
    assert all(row.blank for row in rows[len(DEFAULT_PRICES) :])
    assert f'name="prices-{SONNET}-model" value="claude-sonnet-4*"' in page
    assert f'name="prices-{SONNET}-cacheWrite" value="3.75"' in page
    assert 'name="prices-0-remove"' in page
    assert '<button type="submit" name="up" value="1"' in page
    assert 'name="up" value="0"' not in page  # the first row has nowhere to go
    assert 'action="/settings/usage/reset-prices"' in page


def test_a_changed_price_is_saved_and_the_other_rows_stay_as_they_were():
    client, form = opened()
    form[f"prices-{SONNET}-input"] = "4.5"
    form["currency"] = "EUR"
    response = client.post("/settings/usage", form, follow=True)
    assert response.redirect_chain == [("/settings/usage", 302)]
    assert "Usage settings saved." in response.content.decode()

    expected = copy.deepcopy(DEFAULT_PRICES)
    expected[SONNET]["input"] = 4.5
    assert saved_usage() == settings_defaults.DEFAULTS["usage"] | {"currency": "EUR", "prices": expected}
    assert f'name="prices-{SONNET}-input" value="4.5"' in response.content.decode()


def test_a_save_that_leaves_the_prices_alone_leaves_them_at_the_defaults():
    client, form = opened()
    assert client.post("/settings/usage", form | {"dailyCap": "25.5"}).status_code == 302
    assert saved_usage()["dailyCap"] == 25.5
    # Not a copy of the defaults stored as the admin's: later defaults still reach this instance.
    assert SettingsDocument.objects.get().overrides == {"usage": {"dailyCap": 25.5}}


def test_rows_are_added_in_an_empty_row_removed_by_their_box_and_moved_up():
    client, form = opened()
    blank = len(DEFAULT_PRICES)
    form |= {
        f"prices-{blank}-provider": "*",
        f"prices-{blank}-model": "o3*",
        f"prices-{blank}-input": "2",
        f"prices-{blank}-output": "8",
        f"prices-{blank}-cacheWrite": "0",
        f"prices-{blank}-cacheRead": "0.5",
        "prices-0-remove": "on",
    }
    assert client.post("/settings/usage", form).status_code == 302
    added = settings_defaults.price("*", "o3*", 2, 8, 0, 0.5)
    assert saved_usage()["prices"] == [*DEFAULT_PRICES[1:], added]

    response = client.get("/settings/usage")
    assert len(response.context["rows"]) == len(DEFAULT_PRICES) + BLANK_PRICE_ROWS  # one less, one more
    last = len(DEFAULT_PRICES) - 1
    form = form_of(response) | {"up": str(last)}  # the added row, above the one before it
    assert client.post("/settings/usage", form).status_code == 302
    assert saved_usage()["prices"] == [*DEFAULT_PRICES[1:-1], added, DEFAULT_PRICES[-1]]


def test_invalid_values_come_back_next_to_their_fields_as_typed_and_nothing_is_saved():
    client, form = opened()
    form |= {
        "prices-0-remove": "on",  # the rows after it are saved one index lower: errors still land here
        f"prices-{SONNET}-input": "-1",
        f"prices-{SONNET}-output": "lots",
        "notifyAt": "2",
        "currency": "EUR",
    }
    response = client.post("/settings/usage", form)
    assert response.status_code == 400
    page = response.content.decode()
    cell = f'name="prices-{SONNET}-input" value="-1"'
    assert cell in page
    assert f'aria-invalid="true" aria-describedby="e-prices-{SONNET}-input"' in page
    assert f'<p class="error" id="e-prices-{SONNET}-input">Must be at least 0.</p>' in page
    assert f'<p class="error" id="e-prices-{SONNET}-output">Must be of type number.</p>' in page
    assert f'name="prices-{SONNET}-output" value="lots"' in page
    assert 'name="notifyAt" value="2" inputmode="decimal" aria-invalid="true"' in page
    assert '<p class="error" id="e-notifyAt">Must be at most 1.</p>' in page
    assert 'value="EUR"' in page  # what was valid, as typed too
    assert 'name="prices-0-remove" aria-label="Remove row 1" checked' in page
    assert "e-prices-0-" not in page  # no error on the removed row
    # The summary names the row as the form does, though the saved list had one row less.
    assert f"<li><code>prices.{SONNET}.input</code>: Must be at least 0.</li>" in page
    assert not SettingsDocument.objects.filter(overrides__has_key="usage").exists()
    assert saved_usage() == settings_defaults.DEFAULTS["usage"]


def test_a_half_filled_new_row_is_refused_at_its_empty_cells():
    client, form = opened()
    blank = len(DEFAULT_PRICES) + 1
    form |= {f"prices-{blank}-model": "mistral-*", f"prices-{blank}-input": "1"}
    response = client.post("/settings/usage", form)
    assert response.status_code == 400
    page = response.content.decode()
    assert f'<p class="error" id="e-prices-{blank}-provider">Has an invalid format.</p>' in page
    assert f'<p class="error" id="e-prices-{blank}-output">Must be of type number.</p>' in page
    assert f'name="prices-{blank}-model" value="mistral-*"' in page
    assert saved_usage()["prices"] == DEFAULT_PRICES


def test_reset_brings_back_the_default_prices_and_keeps_the_rest():
    client, form = opened()
    form |= {f"prices-{SONNET}-input": "99", "prices-0-remove": "on", "currency": "EUR"}
    assert client.post("/settings/usage", form).status_code == 302
    assert saved_usage()["prices"] != DEFAULT_PRICES

    response = client.post("/settings/usage/reset-prices", follow=True)
    assert response.redirect_chain == [("/settings/usage", 302)]
    assert "The prices are cocoon&#x27;s defaults again." in response.content.decode()
    assert saved_usage() == settings_defaults.DEFAULTS["usage"] | {"currency": "EUR"}
    assert client.get("/settings/usage/reset-prices").status_code == 405


def test_an_agent_token_can_neither_see_nor_change_the_prices():
    admin, _plain = logged_in()
    form = form_of(admin.get("/settings/usage")) | {f"prices-{SONNET}-input": "0"}
    client, _plain = logged_in(TokenScope.AGENT)
    assert client.get("/settings/usage").status_code == 403
    assert client.post("/settings/usage", form).status_code == 403
    assert client.post("/settings/usage/reset-prices").status_code == 403
    assert not SettingsDocument.objects.filter(overrides__has_key="usage").exists()
    # The usage page is everyone's; its link to the prices only an admin's.
    assert 'href="/settings/usage"' not in client.get("/usage/").content.decode()
    assert '<a href="/settings/usage">Edit prices</a>' in admin.get("/usage/").content.decode()


def test_a_saved_price_prices_the_records_ingested_after_it():
    box = sandbox("build")
    before, after = "1" * 32, "2" * 32  # ids as the proxy writes them
    ingest.ingest([line(box.id, id=before)])
    client, form = opened()
    # Ten times the list price: line() is 1,000 in, 200 out, 300 cache write, 4,000 cache read tokens.
    form |= {
        f"prices-{SONNET}-input": "30",
        f"prices-{SONNET}-output": "150",
        f"prices-{SONNET}-cacheWrite": "37.5",
        f"prices-{SONNET}-cacheRead": "3",
    }
    assert client.post("/settings/usage", form).status_code == 302
    ingest.ingest([line(box.id, id=after)])

    assert UsageRecord.objects.get(pk=before).cost == Decimal("0.008325")  # priced when it came
    record = UsageRecord.objects.get(pk=after)
    assert (record.cost, record.priced) == (Decimal("0.083250"), True)
