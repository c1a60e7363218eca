"""A list page's search box and filters (?q= and one query parameter per filter): what of the list they
keep, and what the filter bar offers (the values the list holds, in words)."""

from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from ui.labels import word

NAMES = {"status": _("Status"), "state": _("State"), "profile": _("Profile"), "node": _("Node")}


def filtered(
    request: HttpRequest, items: list[dict[str, Any]], *, search: Iterable[str], by: Iterable[str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The items whose search fields hold ?q= (any case) and whose filter fields are what the query
    chose; and the filter bar's context."""
    search, by = tuple(search), tuple(by)
    query = request.GET.get("q", "").strip()
    needle = query.casefold()
    chosen = {key: request.GET.get(key, "") for key in by}
    kept = [
        item
        for item in items
        if (not needle or any(needle in str(item.get(field) or "").casefold() for field in search))
        and all(not value or str(item.get(key)) == value for key, value in chosen.items())
    ]
    filters = [
        {
            "key": key,
            "name": NAMES[key],
            "value": chosen[key],
            # What the list holds (and what was chosen, if none does any more).
            "choices": [
                (value, word(key, value))
                for value in sorted(
                    {str(item[key]) for item in items if item.get(key)} | {chosen[key]} - {""}
                )
            ],
        }
        for key in by
    ]
    active = bool(query) or any(chosen.values())
    return kept, {"q": query, "filters": filters, "active": active, "shown": len(kept), "total": len(items)}
