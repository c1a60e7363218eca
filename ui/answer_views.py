"""The answer page of a notification: one item's question, last screen and answers, reached through a
signed link without a login (attention.links), for that item alone."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache

from agents.models import Agent, AgentProfile
from agents.models import default_answers as profile_default_answers
from attention import links
from attention.feed import title_params
from attention.models import Item
from attention.schemas import render_title
from cocoon import activity
from cocoon.actors import Actor
from cocoon.choices import AttentionKind, TokenScope
from cocoon.errors import CocoonError, InvalidParams
from cocoon.registry import registry
from ui.web import error_page, ui_language

REPLY_MAX = 2000


def _answers(agent: Agent | None) -> list[list[str]]:
    if agent is None:
        return []
    profile = AgentProfile.objects.filter(name=agent.profile).first()
    return profile.answers if profile else profile_default_answers()


def _link_actor(item: Item) -> Actor:
    """Who answers through a link: no token, only this item's agent (the view picks it, never the form)."""
    return Actor(token_id=f"link:{item.id}", name="answer link", scope=TokenScope.AGENT)


def _answer(request: HttpRequest, item: Item, agent: Agent, answers: list[list[str]]) -> str:
    """Send the chosen answer or the text reply to the item's agent; what was sent, for the log."""
    actor, language = _link_actor(item), translation.get_language()
    if (choice := request.POST.get("answer", "")).isdigit() and int(choice) < len(answers):
        keys = answers[int(choice)]
        registry.dispatch("agent.send_keys", {"agentId": agent.id, "keys": keys}, actor, language)
        return " ".join(keys)
    reply = request.POST.get("reply", "")
    if not reply.strip() or len(reply) > REPLY_MAX:
        raise InvalidParams(
            _("Choose an answer or write a reply of up to %(max)s characters."), max=REPLY_MAX
        )
    registry.dispatch("agent.send_input", {"agentId": agent.id, "text": reply}, actor, language)
    return _("a reply of %(count)s characters") % {"count": len(reply)}


@never_cache
def answer(request: HttpRequest, token: str) -> HttpResponse:
    language = ui_language(request)
    with translation.override(language):
        try:
            item = links.resolve(token)
        except CocoonError as error:
            return error_page(request, error)
        agent = Agent.objects.filter(pk=item.agent_id).first() if item.agent_id else None
        answers = _answers(agent) if item.kind == AttentionKind.AGENT_BLOCKED else []
        context: dict[str, Any] = {"item": item, "title": render_title(item, language), "agent": agent}
        if request.method == "POST" and agent is not None and answers:
            try:
                with links.use(item):
                    sent = _answer(request, item, agent, answers)
            except CocoonError as error:
                context["error"] = error.render()["message"]
            else:
                activity.record(
                    "attention.answered",
                    title_params(item) | {"answer": str(sent)},
                    actor=_link_actor(item),
                    sandbox_id=item.sandbox_id,
                    agent_id=item.agent_id,
                )
                return render(request, "ui/answer.html", context | {"answered": sent})
        context |= {
            "answers": [(index, " ".join(keys)) for index, keys in enumerate(answers)],
            "terminal": reverse("ui:agent", args=[agent.id]) if agent else None,
        }
        return render(request, "ui/answer.html", context)
