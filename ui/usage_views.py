"""Usage: what agents' LLM requests cost, summed per day, model, agent and task (plain HTML bars), and
every record as a CSV download. money() is how every page writes an amount."""

import csv
from collections.abc import AsyncIterator
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ui.web import call, page, show

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
