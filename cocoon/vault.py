"""Secrets: Fernet-encrypted at rest, key in COCOON_DATA/secrets.key (0600), values never returned."""

from functools import cache

from cryptography.fernet import Fernet
from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import activity
from cocoon.actors import Actor
from cocoon.datadir import read_or_create_private_file
from cocoon.errors import NotFound
from cocoon.models import Secret


@cache
def _fernet() -> Fernet:
    key = read_or_create_private_file(settings.SECRETS_KEY_FILE, lambda: Fernet.generate_key().decode())
    return Fernet(key.encode())


def list_secrets() -> list[Secret]:
    return list(Secret.objects.all())


@transaction.atomic
def set_secret(name: str, value: str, *, actor: Actor) -> Secret:
    ciphertext = _fernet().encrypt(value.encode())
    secret, _created = Secret.objects.update_or_create(name=name, defaults={"ciphertext": ciphertext})
    activity.record("secret.set", {"name": name}, actor=actor)
    return secret


@transaction.atomic
def delete_secret(name: str, *, actor: Actor, missing_ok: bool = False) -> None:
    deleted, _rows = Secret.objects.filter(name=name).delete()
    if not deleted and missing_ok:
        return
    if not deleted:
        raise NotFound(_("Secret %(name)s does not exist."), name=name)
    activity.record("secret.deleted", {"name": name}, actor=actor)


def read_secret(name: str) -> str | None:
    """The clear value, for server-side use only (injecting into agents, the credential proxy)."""
    secret = Secret.objects.filter(name=name).first()
    if secret is None:
        return None
    return _fernet().decrypt(bytes(secret.ciphertext)).decode()
