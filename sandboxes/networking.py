"""The sandboxes' network extension point: what an app that governs a sandbox's traffic (egress) does at
the moments a sandbox's network matters. sandboxes calls these and knows nothing of that app, which
registers its hooks in its AppConfig.ready()."""

from typing import Any, Protocol

from sandboxes.drivers.base import SandboxSpec
from sandboxes.models import Sandbox


class NetworkHooks(Protocol):
    def prepare(self, spec: SandboxSpec) -> SandboxSpec:
        """Before the engine creates the sandbox: the spec with what its network needs (env, DNS)."""
        ...

    def attached(self, sandbox: Sandbox, *, wait: bool) -> None:
        """The sandbox's addresses or state changed (create, start, stop, reconcile); wait: return only
        once its network is in force (nothing in it may go out before)."""
        ...

    def released(self, sandbox_id: str, node: str) -> None:
        """The sandbox is gone from node (deleted, or a failed create undone)."""
        ...

    def on_start(self, install: bool) -> Any:
        """At cocoond start, after reconcile: align the network with the rows at once; returns background
        work (a Celery signature) that brings it up when install, or None."""
        ...


_hooks: list[NetworkHooks] = []


def register(hooks: NetworkHooks) -> None:
    _hooks.append(hooks)


def prepare(spec: SandboxSpec) -> SandboxSpec:
    for hooks in _hooks:
        spec = hooks.prepare(spec)
    return spec


def attached(sandbox: Sandbox, *, wait: bool = False) -> None:
    for hooks in _hooks:
        hooks.attached(sandbox, wait=wait)


def released(sandbox_id: str, node: str) -> None:
    for hooks in _hooks:
        hooks.released(sandbox_id, node)


def on_start(install: bool) -> list[Any]:
    return [work for hooks in _hooks if (work := hooks.on_start(install)) is not None]
