"""The activity log, filtered by sandbox or agent, a hundred entries a page."""

from typing import Any

from django.http import HttpRequest, HttpResponse

from ui.web import call, page, show


@page()
def activity(request: HttpRequest) -> HttpResponse:
    filters = {
        key: request.GET[key].strip() for key in ("sandboxId", "agentId") if request.GET.get(key, "").strip()
    }
    params: dict[str, Any] = dict(filters, limit=100)
    if (before := request.GET.get("before", "")).isdigit():
        params["before"] = int(before)
    entries = call(request, "activity.list", **params)
    context = {
        "entries": entries,
        "filters": filters,
        "older": entries[-1]["id"] if len(entries) == 100 else None,
    }
    return show(request, "ui/activity.html", context)
