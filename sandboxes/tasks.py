"""Celery tasks of sandboxes: take plain values, call a service, nothing else."""

from celery import shared_task

from sandboxes import images, node_health, pools, toolbox
from sandboxes import reconcile as reconciliation


@shared_task(name="sandboxes.tasks.reconcile")
def reconcile() -> int:
    return reconciliation.reconcile()


@shared_task(name="sandboxes.tasks.build_image")
def build_image(variant: str) -> str | None:
    tag = images.build_image(variant)
    if tag is None:  # a build of it runs already: that one refills
        return None
    pools.refill()  # members of the old image go (or at the next beat, if a refill is under way)
    return tag


@shared_task(name=pools.REFILL_TASK)
def refill_pools() -> int:
    return pools.refill()


@shared_task(name="sandboxes.tasks.install_toolbox")
def install_toolbox() -> dict | None:
    return toolbox.install_toolbox()


@shared_task(name="sandboxes.tasks.prepare_node")
def prepare_node(node_id: str) -> None:
    toolbox.prepare_node(node_id)


@shared_task(name="sandboxes.tasks.check_nodes")
def check_nodes() -> int:
    return node_health.check_nodes()
