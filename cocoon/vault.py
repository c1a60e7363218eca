"""Secrets: Fernet-encrypted at rest, key in COCOON_DATA/secrets.key (0600), values never returned."""

from functools import cache
from typing import Any

from cryptography.fernet import Fernet
from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from cocoon import activity
from cocoon.actors import Actor
from cocoon.datadir import read_or_create_private_file
from cocoon.errors import NotFound
from cocoon.models import Project, ProjectSecret, Secret


@cache
def _fernet() -> Fernet:
    key = read_or_create_private_file(settings.SECRETS_KEY_FILE, lambda: Fernet.generate_key().decode())
    return Fernet(key.encode())


def _rows(project: str | None) -> QuerySet[Any]:
    """The server's secrets (project None), or one project's own."""
    return ProjectSecret.objects.filter(project_id=project) if project else Secret.objects.all()


def list_secrets(project: str | None = None) -> list[Any]:
    return list(_rows(project))


@transaction.atomic
def set_secret(name: str, value: str, *, actor: Actor, project: str | None = None) -> Any:
    ciphertext = _fernet().encrypt(value.encode())
    owner = {"project_id": project} if project else {}
    secret, _created = _rows(project).model.objects.update_or_create(
        name=name, **owner, defaults={"ciphertext": ciphertext}
    )
    activity.record("secret.set", {"name": name}, actor=actor, project=project)
    return secret


@transaction.atomic
def delete_secret(name: str, *, actor: Actor, missing_ok: bool = False, project: str | None = None) -> None:
    deleted, _rows_deleted = _rows(project).filter(name=name).delete()
    if not deleted and missing_ok:
        return
    if not deleted:
        raise NotFound(_("Secret %(name)s does not exist."), name=name)
    activity.record("secret.deleted", {"name": name}, actor=actor, project=project)


def read_secret(name: str, project: str | None = None) -> str | None:
    """The clear value, for server-side use only (injecting into agents, the credential proxy). For a
    project's sandbox (project given): its own secret of that name, else the server's if an admin lets
    the project use them (Project.server_secrets), else none."""
    secret = _rows(project).filter(name=name).first() if project else None
    if secret is None and (not project or Project.objects.filter(pk=project, server_secrets=True).exists()):
        secret = Secret.objects.filter(name=name).first()
    if secret is None:
        return None
    return _fernet().decrypt(bytes(secret.ciphertext)).decode()
