"""Answer links: a signed URL that opens one item's answer page without a login, for a while and once.

The token names the item and its link nonce, signed with the server's key and timestamped; it works for
settings notifications.linkMinutes and until an answer is given through it (the answer draws a new nonce).
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.core import signing
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from attention.choices import ItemState
from attention.models import Item, new_link_nonce
from cocoon import config, system
from cocoon.errors import Forbidden

SALT = "cocoon.attention.answer-link"


class LinkInvalid(Forbidden):
    """The link opens nothing (any more)."""


def make(item: Item) -> str:
    token = signing.dumps({"i": item.id, "n": item.link_nonce}, salt=SALT)
    return system.public_url() + reverse("ui:answer", args=[token])


def resolve(token: str) -> Item:
    """The item a token opens, or LinkInvalid: forged, expired, used, or its item closed."""
    max_age = config.get_settings()["notifications"]["linkMinutes"] * 60
    try:
        claims = signing.loads(token, salt=SALT, max_age=max_age)
    except signing.SignatureExpired as error:
        raise LinkInvalid(_("This link has expired.")) from error
    except signing.BadSignature as error:
        raise LinkInvalid(_("This link is not valid.")) from error
    item = Item.objects.filter(pk=claims.get("i")).first() if isinstance(claims, dict) else None
    if item is None or claims.get("n") != item.link_nonce:
        raise LinkInvalid(_("This link was used already."))
    if item.state == ItemState.CLOSED:
        raise LinkInvalid(_("Nothing waits for an answer here any more."))
    return item


@contextmanager
def use(item: Item) -> Iterator[None]:
    """Use the item's link once: it works no more from here on (the next notification of the item
    brings a new one), or LinkInvalid if another answer took it first. An error in the block gives
    the link back, so a failed answer can be tried again."""
    nonce, new, answered = item.link_nonce, new_link_nonce(), item.answered_at
    used = Item.objects.filter(pk=item.pk, link_nonce=nonce).update(
        link_nonce=new, answered_at=timezone.now()
    )
    if not used:
        raise LinkInvalid(_("This link was used already."))
    item.link_nonce = new
    try:
        yield
    except BaseException:
        Item.objects.filter(pk=item.pk, link_nonce=new).update(link_nonce=nonce, answered_at=answered)
        item.link_nonce = nonce
        raise
