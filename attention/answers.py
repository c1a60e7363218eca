"""Answering an item's agent from a notification's link: the answers its profile offers, or a reply.

The link is the only credential: whoever holds it answers this item's agent and no other, once, and only
the question they were shown (a question that changed since is shown again first).
"""

import hashlib
from dataclasses import dataclass

from django.utils.translation import gettext_lazy as _

from agents import services as agents
from agents.models import Agent, AgentProfile, default_answers
from attention import links
from attention.feed import title_params
from attention.models import Item
from cocoon import activity
from cocoon.actors import Actor
from cocoon.choices import AttentionKind, TokenScope
from cocoon.errors import Conflict, InvalidParams

REPLY_MAX = 2000
QUESTION_CHANGED = _("The question has changed since this page was opened: read it again.")


@dataclass(frozen=True)
class Question:
    """What the answer page shows of an item: its agent, the answers offered and the question's
    fingerprint, which an answer must name."""

    item: Item
    agent: Agent | None
    answers: list[list[str]]
    fingerprint: str


def question(item: Item) -> Question:
    agent = Agent.objects.filter(pk=item.agent_id).first() if item.agent_id else None
    answers: list[list[str]] = []
    if agent is not None and item.kind == AttentionKind.AGENT_BLOCKED:
        profile = AgentProfile.objects.filter(name=agent.profile).first()
        answers = profile.answers if profile else default_answers()
    fingerprint = hashlib.sha256(item.detail.encode()).hexdigest()[:16]
    return Question(item, agent, answers, fingerprint)


def chosen(offered: list[list[str]], choice: int | None, reply: str) -> list[str] | None:
    """The keys of answer number `choice` of those offered, or None for the reply (which must say
    something); invalid_params for neither."""
    if choice is None:
        if not reply.strip() or len(reply) > REPLY_MAX:
            raise InvalidParams(
                _("Choose an answer or write a reply of up to %(max)s characters."), max=REPLY_MAX
            )
        return None
    if not 0 <= choice < len(offered):
        raise InvalidParams(_("Choose one of the answers shown."))
    return offered[choice]


def said(keys: list[str] | None, reply: str) -> str:
    """What an answer sent, for the log and the page (a reply by its length: it may be a secret)."""
    return (
        " ".join(keys)
        if keys is not None
        else str(_("a reply of %(count)s characters") % {"count": len(reply)})
    )


def link_actor(item: Item) -> Actor:
    """Who answers through a link: no token, this item's agent only."""
    return Actor(token_id=f"link:{item.id}", name="answer link", scope=TokenScope.AGENT)


def answer(asked: Question, *, seen: str, choice: int | None = None, reply: str = "") -> str:
    """Send answer number `choice`, else the reply, to the item's agent, using the link; what was sent,
    for the log. Conflict if the question is no longer the one whose fingerprint was seen."""
    item, agent = asked.item, asked.agent
    if agent is None or not asked.answers:
        raise Conflict(_("Nothing waits for an answer here any more."))
    if seen != asked.fingerprint:
        raise Conflict(QUESTION_CHANGED)
    keys = chosen(asked.answers, choice, reply)
    actor = link_actor(item)
    with links.use(item):
        if keys is not None:
            agents.send_keys(agent.id, keys, actor=actor)
        else:
            agents.send_input(agent.id, reply, actor=actor)
    sent = said(keys, reply)
    params = title_params(item) | {"answer": sent}
    activity.record(
        "attention.answered", params, actor=actor, sandbox_id=item.sandbox_id, agent_id=item.agent_id
    )
    return sent
