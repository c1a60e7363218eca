"""Django admin: read-mostly. Whatever a service must do (revoking a token, deleting a sandbox, ...) runs
through that service as an admin action, never as a raw row change."""

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from cocoon import tokens, vault
from cocoon.actors import Actor
from cocoon.auth import session_actor, user_actor
from cocoon.errors import CocoonError
from cocoon.models import ActivityEntry, ApiToken, Secret, SettingsDocument


def server_admins_only(request: HttpRequest) -> bool:
    """The Django admin shows every project's rows (cocoon.tenancy): only server admins (active
    superusers) enter, never staff users whatever their model permissions."""
    return bool(request.user.is_active and request.user.is_superuser)


admin.site.has_permission = server_admins_only  # type: ignore[method-assign]


# run takes a row of the admin's own model, which only the admin class knows.
def service_action(name: str, description: Any, run: Callable[[Any, Actor], Any]) -> Callable:
    """An admin action calling a service once per selected row as the Django user's actor."""

    def action(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
        actor = session_actor(request.session) or user_actor(request.user)  # a token's session: the token
        for row in queryset:
            try:
                run(row, actor)
            except CocoonError as error:
                model_admin.message_user(request, f"{row}: {error.render()['message']}", messages.ERROR)

    action.__name__ = name
    return admin.action(description=description)(action)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows are shown, never added, edited or deleted here; changes go through the services' actions."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Tokens are created in the web UI (the plain token is shown once there) and revoked here or there."""

    list_display = ["name", "scope", "created_at", "last_used_at"]
    exclude = ["token_hash"]
    actions = [
        service_action(
            "revoke",
            _("Revoke the selected tokens"),
            lambda token, actor: tokens.revoke_token(token.pk, actor=actor),
        )
    ]


@admin.register(Secret)
class SecretAdmin(ReadOnlyAdmin):
    list_display = ["name", "created_at", "updated_at"]
    exclude = ["ciphertext"]
    actions = [
        service_action(
            "delete_secrets",
            _("Delete the selected secrets"),
            lambda secret, actor: vault.delete_secret(secret.name, actor=actor),
        )
    ]


@admin.register(SettingsDocument)
class SettingsDocumentAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "updated_at"]


@admin.register(ActivityEntry)
class ActivityEntryAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "key", "actor", "sandbox_id", "agent_id"]
    list_filter = ["key"]
    search_fields = ["sandbox_id", "agent_id", "actor"]
