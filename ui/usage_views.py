"""Usage: what agents' LLM requests cost, summed per day, model, agent and task (plain HTML bars), every
budget as last judged, and every record as a CSV download. money() is how every page writes an amount.

The budget section of a sandbox's, an agent's and a task's page is here too: budget_section() for what it
shows, set_budget() for its form's POST."""

import csv
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from cocoon.errors import InvalidParams
from ui.web import actor_of, call, done, form_errors, form_number, page, show
from usage.budgets import describe
from usage.choices import BudgetStatus, Scope

DEFAULT_DAYS = 30
TOP = 10  # agents and tasks in their charts
EXPORT_PAGE_SIZE = 1000  # usage.records' largest page
EXPORT_FIELDS = (
    "id",
    "at",
    "sandboxId",
    "agentId",
    "taskId",
    "scheduleId",
    "provider",
    "model",
    "method",
    "path",
    "status",
    "stream",
    "complete",
    "latencyMs",
    "inputTokens",
    "outputTokens",
    "cacheWriteTokens",
    "cacheReadTokens",
    "cost",
    "priced",
)
# A cell starting with one of these is a formula to a spreadsheet; model and path come from agents.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def money(cost: float, currency: str) -> str:
    """An amount in the page's language: 0.42 USD; a fraction of a cent keeps four places."""
    places = 2 if cost == 0 or cost >= 0.01 else 4
    amount = Decimal(str(cost)).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)  # number_format cuts
    return gettext("%(amount)s %(currency)s") % {
        "amount": number_format(amount, places),
        "currency": currency,
    }


def count(number: int) -> str:
    """A token count with the language's thousands separator."""
    return number_format(number, force_grouping=True)


def spent(summary: dict[str, Any]) -> dict[str, str]:
    """A summary's total as the pages show it: cost, requests and tokens."""
    total = summary["total"]
    return {"cost": money(total["cost"], summary["currency"])} | {
        name: count(total[name])
        for name in ("requests", "inputTokens", "outputTokens", "cacheWriteTokens", "cacheReadTokens")
    }


def _day(raw: str | None) -> date | None:
    try:
        return date.fromisoformat(raw or "")
    except ValueError:
        return None


def _filters(request: HttpRequest) -> tuple[dict[str, Any], dict[str, str]]:
    """The method filters of the query (whole days in the server's zone, `to` included), and the
    form's values: by default the last DEFAULT_DAYS days."""
    today = timezone.localdate()
    start = _day(request.GET.get("from")) or today - timedelta(days=DEFAULT_DAYS - 1)
    end = _day(request.GET.get("to")) or today
    zone = timezone.get_current_timezone()
    params: dict[str, Any] = {
        "from": datetime.combine(start, time.min, zone).isoformat(),
        "to": datetime.combine(end + timedelta(days=1), time.min, zone).isoformat(),
    }
    form = {"from": start.isoformat(), "to": end.isoformat()}
    if sandbox_id := request.GET.get("sandboxId", "").strip():
        params["sandboxId"] = form["sandboxId"] = sandbox_id
    return params, form


def bars(summary: dict[str, Any], limit: int | None = None) -> list[dict[str, Any]]:
    """A chart's rows: each group's cost, and its bar's width as a share of the largest."""
    groups = summary["groups"][:limit]
    largest = max((group["cost"] for group in groups), default=0)
    return [
        {
            "key": group["key"],
            "cost": money(group["cost"], summary["currency"]),
            "requests": group["requests"],
            # a CSS width: never in the language's decimal separator
            "share": f"{group['cost'] / largest * 100:.1f}" if largest else "0",
            "percent": round(group["cost"] / largest * 100) if largest else 0,
        }
        for group in groups
    ]


# -- budgets -----------------------------------------------------------------------------------------

BUDGET_NUMBERS = ("cost", "tokens")
DEFAULT_ON_SPENT = "refuse"  # what a budget without onSpent does (cocoon.schema BUDGET)
ON_SPENT = {
    "refuse": _("refuse its requests"),
    "stop": _("refuse its requests and stop its agents"),
}
BUDGET_STATES = {
    BudgetStatus.OK: _("ok"),
    BudgetStatus.WARNED: _("warned"),
    BudgetStatus.EXCEEDED: _("exceeded"),
}
STATE_ORDER = (BudgetStatus.EXCEEDED, BudgetStatus.WARNED, BudgetStatus.OK)  # what needs a person first
SCOPES = {
    Scope.AGENT: _("agent"),
    Scope.TASK: _("task"),
    Scope.SANDBOX: _("sandbox"),
    Scope.DAY: _("daily cap"),
}
OWNER_PAGES = {Scope.AGENT: "ui:agent", Scope.TASK: "ui:task", Scope.SANDBOX: "ui:sandbox"}
OWNER_PARAMS = {Scope.AGENT: "agentId", Scope.TASK: "taskId", Scope.SANDBOX: "sandboxId"}


def judged(state: dict[str, Any]) -> dict[str, Any]:
    """A budget as last judged (usage.budgets) as the pages show it: what was spent and its limit in the
    budget's own terms (cost, tokens), its state, and what happens when it is spent."""
    spent, limit = describe(state["budget"], Decimal(str(state["spentCost"])), state["spentTokens"])
    return state | {
        "spent": spent,
        "limit": limit,
        "stateName": BUDGET_STATES[state["state"]],
        "onSpentName": ON_SPENT[state["budget"].get("onSpent", DEFAULT_ON_SPENT)],
    }


def _owner_page(state: dict[str, Any], sandbox_ids: set[str]) -> str:
    """The page of a budget's owner: none for the daily cap, nor for a sandbox removed (its agents went
    with it)."""
    scope = state["scope"]
    if scope == Scope.DAY or (scope != Scope.TASK and state["sandboxId"] not in sandbox_ids):
        return ""
    return reverse(OWNER_PAGES[scope], args=[state["subject"]])


def _budgets(request: HttpRequest, sandboxes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every budget for the usage page, the spent ones first."""
    sandbox_ids = {sandbox["id"] for sandbox in sandboxes}
    states = sorted(call(request, "usage.budgets"), key=lambda state: STATE_ORDER.index(state["state"]))
    return [
        judged(state) | {"scopeName": SCOPES[state["scope"]], "page": _owner_page(state, sandbox_ids)}
        for state in states
    ]


@dataclass
class BudgetForm:
    """A budget form as posted and refused: its values as typed, and the error for the form."""

    values: dict[str, str]
    errors: dict[str, Any]


def budget_section(
    request: HttpRequest,
    scope: Scope,
    subject: str,
    budget: dict[str, Any] | None,
    posted: BudgetForm | None = None,
) -> dict[str, Any]:
    """What the budget section of an owner's page shows (ui/_budget.html): its budget, how much of it was
    spent as last judged, and for an admin the form to set or remove it (after a refused POST as typed,
    with the errors next to the fields)."""
    state = next(
        (
            state
            for state in call(request, "usage.budgets")
            if (state["scope"], state["subject"]) == (scope, subject)
        ),
        None,
    )
    section: dict[str, Any] = {
        "current": budget,
        "limit": describe(budget, Decimal(0), 0)[1] if budget else "",
        "onSpentName": ON_SPENT[budget.get("onSpent", DEFAULT_ON_SPENT)] if budget else "",
        "judged": judged(state) if state else None,
    }
    if not actor_of(request).is_admin:
        return section
    saved = budget or {}
    # As text: a number the template wrote would be localized, and a German 2,5 comes back as no number.
    values = posted.values if posted else {name: str(saved.get(name, "")) for name in BUDGET_NUMBERS}
    values = {"onSpent": saved.get("onSpent", DEFAULT_ON_SPENT)} | values
    errors = posted.errors if posted else None
    fields = errors["fields"] if errors else {}
    currency = call(request, "settings.get")["usage"]["currency"]
    labels = {
        "cost": _("Cost (%(currency)s)") % {"currency": currency},
        "tokens": _("Tokens (in, out and cache together)"),
    }
    return section | {
        "action": reverse(f"ui:{scope}_budget", args=[subject]),
        "fields": [(name, labels[name], values[name], fields.get(name, "")) for name in BUDGET_NUMBERS],
        "onSpent": values["onSpent"],
        "onSpentError": fields.get("onSpent", ""),
        "onSpentChoices": ON_SPENT.items(),
        "errors": errors,
    }


def _budget_from(values: dict[str, str]) -> dict[str, Any]:
    """usage.set_budget's budget from the form: the fields filled in; what is no number goes as typed, for
    the schema to answer with a field error."""
    budget: dict[str, Any] = {name: form_number(values[name]) for name in BUDGET_NUMBERS if values[name]}
    if values["onSpent"]:
        budget["onSpent"] = values["onSpent"]
    return budget


def set_budget(
    request: HttpRequest,
    scope: Scope,
    subject: str,
    owner_page: Callable[[HttpRequest, str, BudgetForm], HttpResponse],
) -> HttpResponse:
    """The POST of a page's budget form: usage.set_budget for the page's owner (with "remove": none), then
    back to the page; a refused budget shows the page again (400) with the errors next to the fields,
    nothing changed."""
    values = {name: request.POST.get(name, "").strip() for name in (*BUDGET_NUMBERS, "onSpent")}
    budget = None if request.POST.get("remove") else _budget_from(values)
    try:
        call(request, "usage.set_budget", budget=budget, **{OWNER_PARAMS[scope]: subject})
    except InvalidParams as error:
        return owner_page(request, subject, BudgetForm(values, form_errors(error, prefix="budget.")))
    message = _("The budget was removed.") if budget is None else _("The budget was saved.")
    return done(request, reverse(OWNER_PAGES[scope], args=[subject]), message)


@page()
def usage(request: HttpRequest) -> HttpResponse:
    params, form = _filters(request)

    def summary(group_by: str) -> dict[str, Any]:
        result: dict[str, Any] = call(request, "usage.summary", groupBy=group_by, **params)
        return result

    by_model = summary("model")
    sandboxes = call(request, "sandbox.list")
    context = {
        "form": form,
        "query": urlencode(form),
        "sandboxes": sandboxes,
        # a removed sandbox's records are still there to filter by
        "unknown_sandbox": form.get("sandboxId", "") not in {"", *(sandbox["id"] for sandbox in sandboxes)},
        "total": spent(by_model),
        "budgets": _budgets(request, sandboxes),
        "charts": [
            ("days", _("Spend per day"), bars(summary("day"))),
            ("models", _("Spend per model"), bars(by_model)),
            ("agents", _("Top agents"), bars(summary("agent"), TOP)),
            ("tasks", _("Top tasks"), bars(summary("task"), TOP)),
        ],
    }
    return show(request, "ui/usage.html", context)


class _Echo:
    """A file for csv.writer that hands back what it is given."""

    def write(self, value: str) -> str:
        return value


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return f"'{value}"
    return value


def _rows(records: list[dict[str, Any]]) -> bytes:
    writer = csv.writer(_Echo())
    return "".join(
        writer.writerow([_cell(record[name]) for name in EXPORT_FIELDS]) for record in records
    ).encode()


async def _export(
    request: HttpRequest, params: dict[str, Any], first: dict[str, Any]
) -> AsyncIterator[bytes]:
    """The header, then page after page: each read in a thread, none held after it is sent (a sync
    iterator would be read whole under ASGI first)."""
    yield csv.writer(_Echo()).writerow(EXPORT_FIELDS).encode()
    result = first
    while True:
        yield _rows(result["records"])
        if not result["next"]:
            return
        result = await sync_to_async(call)(
            request, "usage.records", limit=EXPORT_PAGE_SIZE, cursor=result["next"], **params
        )


@page()
def export(request: HttpRequest) -> StreamingHttpResponse:
    """Every record of the page's filters as CSV, with the wire's field names."""
    params, _form = _filters(request)
    # the first page here, so that a refused call is an error page rather than a cut-off download
    first = call(request, "usage.records", limit=EXPORT_PAGE_SIZE, **params)
    response = StreamingHttpResponse(_export(request, params, first), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="cocoon-usage.csv"'
    return response
