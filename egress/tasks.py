import logging

from celery import shared_task

from egress import fence, remote, services

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


@shared_task(ignore_result=True)
def set_fence(node: str | None = None) -> None:
    """The open sandboxes' fence on one node, or on every node that answers."""
    if node is None:
        fence.set_everywhere()
    else:
        try:
            fence.set_fence(node)
        except Exception:
            logger.exception("could not set the open sandboxes' fence on node %s", node)
