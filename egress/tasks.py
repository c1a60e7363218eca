import logging

from celery import shared_task

from egress import remote, services

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def tick() -> None:
    """Collect denied attempts; bring the proxy back if it is down while egress sandboxes need it (and
    trade files with the remote nodes' proxies first)."""
    remote.tick()
    services.collect_denied()
    services.watch_proxy()


@shared_task(ignore_result=True)
def start_proxy() -> None:
    services.start_proxy()
