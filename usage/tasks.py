"""Celery tasks of usage: take ids or plain values, call a service, nothing else."""

from celery import shared_task

from egress.policy import remote_nodes_in_use
from sandboxes.models import LOCAL_NODE
from usage import ingest


@shared_task(name="usage.tasks.collect")
def collect() -> int:
    """The local proxy's records, and those egress.remote brought from the remote nodes' proxies."""
    return sum(ingest.collect(node=node) for node in [LOCAL_NODE, *remote_nodes_in_use()])
