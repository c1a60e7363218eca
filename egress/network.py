"""egress's part at the moments a sandbox's network matters (registered with sandboxes.networking)."""

from typing import Any

from django.db import transaction

from egress import policy, services
from sandboxes.choices import NetworkMode
from sandboxes.drivers.base import SandboxSpec
from sandboxes.models import LOCAL_NODE, Sandbox


class EgressNetwork:
    def prepare(self, spec: SandboxSpec) -> SandboxSpec:
        return services.prepare(spec)

    def attached(self, sandbox: Sandbox, *, wait: bool) -> None:
        # An egress sandbox's way out is the proxy: it must know the address before anything goes out.
        if wait and sandbox.network == NetworkMode.EGRESS:
            services.sync(wait=True, node=sandbox.node)
        else:
            transaction.on_commit(services.sync_quietly)

    def released(self, sandbox_id: str, node: str) -> None:
        if node != LOCAL_NODE:  # its proxy's last records come after the row is gone
            policy.remember_gone(sandbox_id, node)
        transaction.on_commit(services.sync_quietly)

    def on_start(self, install: bool) -> Any:
        from celery import chain

        from egress.tasks import set_fence, start_proxy

        # A change the last cocoond committed but was killed before publishing (egress.allow, a setting)
        # would otherwise stay out of the proxy's policy until the next change: publish what the rows say.
        services.sync_quietly()
        if not services.enforced():
            return None
        # The fence always (netfilter rules do not outlive a host's restart); then the proxy if asked.
        return chain(set_fence.si(), start_proxy.si()) if install else set_fence.si()
