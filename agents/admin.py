from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from agents import services
from agents.models import Agent, AgentProfile
from cocoon.admin import ReadOnlyAdmin, service_action


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
    """Profiles are plain configuration: edited here, read at every spawn."""

    list_display = ["name", "prompt_mode", "hooks", "builtin"]
    readonly_fields = ["builtin"]


@admin.register(Agent)
class AgentAdmin(ReadOnlyAdmin):
    list_display = ["id", "sandbox", "profile", "status", "status_source", "created_at"]
    list_filter = ["status", "profile"]
    search_fields = ["id", "sandbox__id", "sandbox__name"]
    actions = [
        service_action(
            "kill",
            _("Kill the selected agents"),
            lambda agent, actor: services.kill_agent(agent.pk, actor=actor),
        )
    ]
