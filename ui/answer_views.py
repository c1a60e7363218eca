"""Answering a blocked agent: the answer page of a notification (one item's question, last screen and
answers, reached through a signed link without a login, attention.links, for that item alone), and the
answer a logged-in person sends from an agent's card."""

import re
from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from agents.choices import AgentStatus
from attention import answers, links
from attention.schemas import render_title
from cocoon.errors import CocoonError, Conflict
from ui.web import call, done, error_page, page, ui_language


def choice_of(form: QueryDict) -> int | None:
    """The answer button's number, if one was pressed."""
    raw = form.get("answer", "")
    return int(raw) if re.fullmatch("[0-9]{1,3}", raw) else None


@page()
@require_POST
def agent_answer(request: HttpRequest, agent_id: str) -> HttpResponse:
    """Answer a blocked agent from its card: one of its profile's answers or a reply, as the answer page
    sends them, made with the person's own calls; seen is the blocked status the card showed."""
    current = call(request, "agent.get", agentId=agent_id)
    if current["status"] != AgentStatus.BLOCKED or request.POST.get("seen") != current["statusSince"]:
        raise Conflict(answers.QUESTION_CHANGED)
    reply = request.POST.get("reply", "")
    offered = call(request, "profile.get", name=current["profile"])["answers"]
    keys = answers.chosen(offered, choice_of(request.POST), reply)
    if keys is not None:
        call(request, "agent.send_keys", agentId=agent_id, keys=keys)
    else:
        call(request, "agent.send_input", agentId=agent_id, text=reply)
    sent = _("Sent: %(answer)s.") % {"answer": answers.said(keys, reply)}
    return done(request, reverse("ui:agent", args=[agent_id]), sent)


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
            try:
                sent = answers.answer(
                    asked,
                    seen=request.POST.get("seen", ""),
                    choice=choice_of(request.POST),
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
