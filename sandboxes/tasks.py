"""Celery tasks of sandboxes: take plain values, call a service, nothing else."""

from celery import shared_task

from sandboxes import images, services, toolbox


@shared_task(name="sandboxes.tasks.reconcile")
def reconcile() -> int:
    return services.reconcile()


@shared_task(name="sandboxes.tasks.build_image")
def build_image(variant: str) -> str:
    return images.build_image(variant)


@shared_task(name="sandboxes.tasks.install_toolbox")
def install_toolbox() -> dict:
    return toolbox.install_toolbox()
