"""The answer page of a notification: one item's question, last screen and answers, reached through a
signed link without a login (attention.links), for that item alone."""

import re
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import translation
from django.views.decorators.cache import never_cache

from attention import answers, links
from attention.schemas import render_title
from cocoon.errors import CocoonError
from ui.web import error_page, ui_language


@never_cache
def answer(request: HttpRequest, token: str) -> HttpResponse:
    language = ui_language(request)
    with translation.override(language):
        try:
            asked = answers.question(links.resolve(token))
        except CocoonError as error:
            return error_page(request, error)
        context: dict[str, Any] = {"title": render_title(asked.item, language), "asked": asked}
        if request.method == "POST":
            choice = request.POST.get("answer", "")
            try:
                sent = answers.answer(
                    asked,
                    seen=request.POST.get("seen", ""),
                    choice=int(choice) if re.fullmatch("[0-9]{1,3}", choice) else None,
                    reply=request.POST.get("reply", ""),
                )
            except CocoonError as error:
                context["error"] = error.render()["message"]
                asked = answers.question(asked.item)  # as it is now
            else:
                return render(request, "ui/answer.html", context | {"answered": sent})
        context |= {
            "asked": asked,
            "choices": [(index, " ".join(keys)) for index, keys in enumerate(asked.answers)],
            "reply_max": answers.REPLY_MAX,
            "terminal": reverse("ui:agent", args=[asked.agent.id]) if asked.agent else None,
        }
        return render(request, "ui/answer.html", context)
