from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from agents import profiles, services
from agents.models import Agent, AgentProfile
from cocoon.admin import ReadOnlyAdmin, service_action


@admin.register(AgentProfile)
class AgentProfileAdmin(ReadOnlyAdmin):
    """Shown here; edited in the web UI or with profile.*, whose checks (screen patterns must compile)
    a raw edit here would skip."""

    list_display = ["name", "prompt_mode", "hooks", "builtin"]
    actions = [
        service_action(
            "reset",
            _("Reset the selected built-in profiles"),
            lambda profile, actor: profiles.reset_profile(profile.name, actor=actor),
        ),
        service_action(
            "delete_profiles",
            _("Delete the selected profiles"),
            lambda profile, actor: profiles.delete_profile(profile.name, actor=actor),
        ),
    ]


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
