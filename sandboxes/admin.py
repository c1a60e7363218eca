from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from cocoon.admin import ReadOnlyAdmin, service_action
from sandboxes import services
from sandboxes.models import Sandbox


@admin.register(Sandbox)
class SandboxAdmin(ReadOnlyAdmin):
    list_display = ["name", "id", "state", "network", "image", "driver", "created_at"]
    list_filter = ["state", "network", "driver"]
    search_fields = ["id", "name", "repo"]
    actions = [
        service_action(
            "start",
            _("Start the selected sandboxes"),
            lambda sandbox, actor: services.start_sandbox(sandbox.pk, actor=actor),
        ),
        service_action(
            "stop",
            _("Stop the selected sandboxes"),
            lambda sandbox, actor: services.stop_sandbox(sandbox.pk, actor=actor),
        ),
        # Removes the container and workspace too, which a row delete would leave behind.
        service_action(
            "delete_sandboxes",
            _("Delete the selected sandboxes"),
            lambda sandbox, actor: services.delete_sandbox(sandbox.pk, actor=actor),
        ),
    ]
