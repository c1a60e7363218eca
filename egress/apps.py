from typing import Any

from django.apps import AppConfig
from django.db import transaction
from django.db.models.signals import post_delete, post_save


class EgressConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "egress"

    def ready(self) -> None:
        from cocoon.models import Project, ProjectSecret, Secret, SettingsDocument
        from egress import setup  # noqa: F401 - registers the checklist item
        from egress.models import ProviderGrant
        from egress.network import EgressNetwork
        from sandboxes import networking, signals

        # Sandboxes tell egress when their network matters (create, start, stop, delete, reconcile).
        networking.register(EgressNetwork())
        # Settings, secrets (a project's, and whether it may use the server's) and grants are the policy's
        # other inputs: publish once a change is committed.
        for model in (SettingsDocument, Secret, ProjectSecret, Project, ProviderGrant):
            post_save.connect(_policy_inputs_changed, sender=model, dispatch_uid=f"egress-{model.__name__}")
            post_delete.connect(
                _policy_inputs_changed, sender=model, dispatch_uid=f"egress-del-{model.__name__}"
            )
        # The open sandboxes' fence: set again where the allowed CIDRs changed, and on a new node.
        post_save.connect(_settings_changed, sender=SettingsDocument, dispatch_uid="egress-fence")
        signals.node_added.connect(_node_added, dispatch_uid="egress-fence-node")


def _policy_inputs_changed(sender: type, instance: object, **kwargs: object) -> None:
    from egress.services import sync_quietly

    transaction.on_commit(sync_quietly)


def _settings_changed(sender: type, instance: object, **kwargs: object) -> None:
    from egress import fence, services

    # In the request: once settings.update answers, the new allowance is in force (or logged as not).
    if services.enforced():
        transaction.on_commit(lambda: fence.set_everywhere(changed_only=True))


def _node_added(sender: type, node: Any, **kwargs: Any) -> None:
    from egress.tasks import set_fence

    transaction.on_commit(lambda: set_fence.delay(node.id))
