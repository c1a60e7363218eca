"""Settings → Usage: the currency, the daily cap, when to notify, and the price table (its rows as the
form posts them, their errors in their cells)."""

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from cocoon.choices import ProviderKind
from cocoon.errors import CocoonError
from cocoon.settings_schema import PRICE_FIELDS
from ui.web import call, done, form_errors, form_number, page, show

USAGE_FIELDS = {
    "currency": _("Currency (ISO 4217 code, e.g. USD)"),
    "dailyCap": _("Daily cap for all agents together (0: no cap)"),
    "notifyAt": _("Notify when this share of a budget is spent (e.g. 0.8)"),
}
PRICE_COLUMNS = {
    "provider": _("Provider"),
    "model": _("Model"),
    "input": _("Input"),
    "output": _("Output"),
    "cacheWrite": _("Cache write"),
    "cacheRead": _("Cache read"),
}
BLANK_PRICE_ROWS = 3  # empty rows under the table, to add prices


@dataclass
class PriceRow:
    """One row of the price table as the form shows it: its values as text, and its field errors."""

    values: dict[str, str]
    remove: bool = False
    errors: dict[str, str] = dataclass_field(default_factory=dict)

    @property
    def blank(self) -> bool:
        return not any(self.values.values())

    @property
    def sent(self) -> bool:
        """Whether the row is one of the prices saved (not removed, not left empty)."""
        return not self.remove and not self.blank

    def cells(self) -> list[tuple[str, Any, str, str]]:
        return [
            (column, label, self.values[column], self.errors.get(column, ""))
            for column, label in PRICE_COLUMNS.items()
        ]

    def entry(self) -> dict[str, Any]:
        """The settings' price entry; what is no number goes as typed, for the schema to answer."""
        numbers = {name: form_number(self.values[name]) for name in PRICE_FIELDS}
        return {"provider": self.values["provider"], "model": self.values["model"]} | numbers


def _price_rows_of(form: Any) -> list[PriceRow]:
    """The table's rows as posted (prices-<index>-<column>), with the row of "move up" moved up."""
    rows: list[PriceRow] = []
    while f"prices-{len(rows)}-model" in form:
        prefix = f"prices-{len(rows)}-"
        values = {column: form.get(prefix + column, "").strip() for column in PRICE_COLUMNS}
        rows.append(PriceRow(values, remove=form.get(prefix + "remove") == "on"))
    up = form.get("up", "")
    if up.isdigit() and 0 < int(up) < len(rows):
        index = int(up)
        rows[index - 1], rows[index] = rows[index], rows[index - 1]
    return rows


def _usage_errors(error: CocoonError, rows: list[PriceRow]) -> tuple[dict[str, Any], dict[str, str]]:
    """The error for the form, and the top fields' errors (and the table's as "prices"). A price's error
    (usage.prices.<index>.<column>, an index of the rows saved) goes to its row's cell, and the summary
    names the row as the form does: removed and empty rows were never sent."""
    saved = [index for index, row in enumerate(rows) if row.sent]
    errors = form_errors(error, prefix="usage.")
    fields: dict[str, str] = {}
    summary: dict[str, str] = {}
    for path, message in errors["fields"].items():
        name, _dot, rest = path.partition(".")
        index, _dot, column = rest.partition(".")
        if name == "prices" and index.isdigit() and int(index) < len(saved):
            row = saved[int(index)]
            rows[row].errors.setdefault(column if column in PRICE_COLUMNS else "model", message)
            path = f"prices.{row}.{column}".rstrip(".")
        elif name in USAGE_FIELDS:
            fields[name] = message
        else:
            fields.setdefault("prices", message)
        summary[path] = message
    return errors | {"fields": summary}, fields


@page(admin=True)
def prices(request: HttpRequest) -> HttpResponse:
    """Settings usage: the currency, the daily cap, when to notify, and the price table (first match
    wins, so the rows keep their order). POST saves it all or nothing; field errors next to the fields."""
    document = call(request, "settings.get")
    current = document["usage"]
    errors: dict[str, Any] | None = None
    field_errors: dict[str, str] = {}
    if request.method == "POST":
        typed = {name: request.POST.get(name, "").strip() for name in USAGE_FIELDS}
        rows = _price_rows_of(request.POST)
        usage = {
            "currency": typed["currency"],
            "dailyCap": form_number(typed["dailyCap"]),
            "notifyAt": form_number(typed["notifyAt"]),
            "prices": [row.entry() for row in rows if row.sent],
        }
        # Only what changed: prices left as they are keep following cocoon's defaults.
        patch = {name: value for name, value in usage.items() if value != current[name]}
        try:
            if patch:
                call(request, "settings.update", usage=patch)
            return done(request, request.path, _("Usage settings saved."))
        except CocoonError as error:
            errors, field_errors = _usage_errors(error, rows)
    else:
        # As text: a number the template wrote would be localized, and a German 2,5 comes back as no number.
        typed = {name: str(current[name]) for name in USAGE_FIELDS}
        rows = [
            PriceRow({column: str(entry[column]) for column in PRICE_COLUMNS}) for entry in current["prices"]
        ]
        rows += [PriceRow(dict.fromkeys(PRICE_COLUMNS, "")) for _index in range(BLANK_PRICE_ROWS)]
    context = {
        "section": "usage",
        "fields": [
            (name, label, typed[name], field_errors.get(name, "")) for name, label in USAGE_FIELDS.items()
        ],
        "rows": rows,
        "columns": PRICE_COLUMNS.values(),
        "currency": current["currency"],
        "errors": errors,
        "prices_error": field_errors.get("prices", ""),
        # What a row's provider may be: *, a kind, or a provider's id.
        "provider_choices": ["*", *ProviderKind.values, *sorted(document["providers"])],
    }
    return show(request, "ui/settings/usage.html", context, status=400 if errors else 200)


@page(admin=True)
@require_POST
def prices_reset(request: HttpRequest) -> HttpResponse:
    call(request, "settings.reset", keys=["usage.prices"])
    return done(request, reverse("ui:prices"), _("The prices are cocoon's defaults again."))
