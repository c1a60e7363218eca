"""Celery tasks of sandboxes: take plain values, call a service, nothing else."""

from celery import shared_task

from sandboxes import images, services


@shared_task(name="sandboxes.tasks.reconcile")
def reconcile() -> int:
    return services.reconcile()


@shared_task(name="sandboxes.tasks.build_image")
def build_image(variant: str) -> str:
    return images.build_image(variant)
