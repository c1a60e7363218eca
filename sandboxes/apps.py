from typing import TYPE_CHECKING, Any

from django.apps import AppConfig
from django.db import transaction

if TYPE_CHECKING:
    from sandboxes.models import Node


class SandboxesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sandboxes"

    def ready(self) -> None:
        from cocoon import tenancy
        from cocoon.registry import registry
        from cocoon.system import register_info
        from sandboxes import pools, services, setup, signals
        from sandboxes.drivers import as_driver_error, engine_errors
        from sandboxes.models import Sandbox

        registry.translate(*engine_errors(), into=as_driver_error)
        registry.owned("sandboxId", services.check_visible)
        tenancy.set_sandboxes(
            tenancy.Sandboxes(
                owner=services.sandbox_owner,
                visible_ids=lambda actor: Sandbox.objects.visible_to(actor).values("id"),
            )
        )
        register_info(setup.engine_info)
        register_info(pools.info)
        signals.node_added.connect(_prepare_node, dispatch_uid="sandboxes.prepare_node")


def _prepare_node(sender: type, node: "Node", **kwargs: Any) -> None:
    """A node taken in gets the toolbox in the background, once it is committed."""
    from sandboxes.tasks import prepare_node

    transaction.on_commit(lambda: prepare_node.delay(node.id))
