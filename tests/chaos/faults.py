"""Fault injection for the chaos suite: cut a call off mid-way by SIGKILLing the cocoond serving it, and
check afterwards that rows and engine objects agree."""

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tests.conftest import Cocoond, instance_objects, wait_until


@dataclass
class Cut:
    """What the client of a killed call saw: a response (the kill came too late) or a transport error."""

    response: httpx.Response | None = None
    error: Exception | None = None

    @property
    def interrupted(self) -> bool:
        return self.response is None


def kill_during(
    cocoond: Cocoond, method: str, params: Any, ready: Callable[[], bool], timeout: float = 60
) -> Cut:
    """Start the call in a thread; once ready() holds while the call is still open, freeze cocoond
    (SIGSTOP, so nothing moves on while we look) and SIGKILL it. Returns what the client got."""
    cut = Cut()

    def call() -> None:
        try:
            cut.response = cocoond.post(method, params)
        except httpx.HTTPError as error:
            cut.error = error

    thread = threading.Thread(target=call)
    thread.start()
    wait_until(lambda: not thread.is_alive() or ready(), timeout=timeout, interval=0.02)
    os.kill(cocoond.proc.pid, signal.SIGSTOP)
    cocoond.proc.kill()
    cocoond.proc.wait()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the client still waits on a killed cocoond"
    return cut


def sandbox_containers(docker_client: Any, instance: str) -> set[str]:
    """The sandbox ids the engine has containers for."""
    filters = {"label": [f"io.cocoon.instance={instance}", "io.cocoon.kind=sandbox"]}
    containers = docker_client.containers.list(all=True, filters=filters, ignore_removed=True)
    return {container.labels["io.cocoon.sandbox"] for container in containers}


def assert_rows_match_engine(cocoond: Cocoond, docker_client: Any) -> list[dict[str, Any]]:
    """Every sandbox row is running with its container, and every engine object belongs to a row."""
    rows = cocoond.call("sandbox.list")
    assert [row for row in rows if row["state"] != "running"] == []
    ids = {row["id"] for row in rows}
    assert sandbox_containers(docker_client, cocoond.instance) == ids
    for kind, names in instance_objects(docker_client, cocoond.instance).items():
        strays = {name for name in names if not any(sandbox_id in name for sandbox_id in ids)}
        assert strays == set(), f"{kind} without a row: {strays}"
    return rows


def settle(check: Callable[[], Any], bound_s: float = 30) -> Any:
    """The system is back to green within bound_s: check() stops raising AssertionError."""
    deadline = time.monotonic() + bound_s
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def egress_sandbox(cocoond: Cocoond, upstream: Any, image: str) -> dict[str, Any]:
    """Point cocoond's egress at the stand-in upstream (the .invalid names of tests/upstream.py, allowed
    as in tests/test_egress.py), start its proxy and create one egress sandbox."""
    from tests.test_egress import ALLOWED
    from tests.upstream import NAMES

    hosts = {name: upstream.address for name in NAMES}
    cocoond.call(
        "settings.update", {"egress": {"allowlist": ALLOWED, "hosts": hosts, "caBundle": upstream.ca_pem}}
    )
    cocoond.call("egress.start_proxy")
    return cocoond.call("sandbox.create", {"network": "egress", "image": image})


def proxy_container(docker_client: Any, instance: str) -> Any:
    """The egress proxy's container of one instance, found by its labels (egress/container.py)."""
    filters = {"label": [f"io.cocoon.instance={instance}", "io.cocoon.kind=egress-proxy"]}
    (container,) = docker_client.containers.list(all=True, filters=filters)
    return container
