from django.apps import AppConfig
from django.db.models.signals import post_delete


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"

    def ready(self) -> None:
        from agents import poller, services, setup  # noqa: F401 - setup registers the checklist item
        from agents.models import Agent
        from cocoon.registry import registry
        from sandboxes import signals

        registry.owned("agentId", services.check_visible)
        signals.stopping.connect(poller.take_last_screens, dispatch_uid="agents.last_screens")
        signals.stopped.connect(poller.end_with_sandbox, dispatch_uid="agents.end_with_sandbox")
        # An agent gone with its sandbox ends as one that exited: its steering token with it.
        post_delete.connect(services.deleted, sender=Agent, dispatch_uid="agents.deleted")
