"""The egress proxy's and the open sandboxes' fence's items on the setup checklist."""

from typing import Any

from django.utils.translation import gettext_lazy as _

from cocoon.errors import interpolate_lazy
from cocoon.setup import register_check
from egress import fence, services
from egress.models import Fence
from sandboxes.nodes import reachable_nodes


@register_check("egressProxy", _("Egress proxy"), fix="egress.start_proxy")
def _egress_proxy() -> tuple[bool, Any]:
    try:
        if not services.enforced():
            return True, _("Egress is configured but not enforced by this driver.")
        from egress.container import proxy_status

        status = proxy_status()
    except Exception as error:  # engine down: say so instead of failing the list
        return False, str(error)
    if not status.running:
        return False, _("The egress proxy is not running: start it with egress.start_proxy.")
    if status.policy_error:
        return False, interpolate_lazy(
            _("The egress proxy refused the current policy and keeps serving the last one: %(reason)s"),
            {"reason": status.policy_error},
        )
    if status.policy_version is not None and status.acknowledged_version != status.policy_version:
        return False, _("The egress proxy has not loaded the current policy yet.")
    return True, interpolate_lazy(
        _("Running, policy version %(version)s."), {"version": status.policy_version}
    )


@register_check("openFence", _("Open sandboxes' fence"), fix="egress.set_fence")
def _open_fence() -> tuple[bool, Any]:
    """Whether every node that answers holds the current fence. Ok with a warning when CIDRs are allowed."""
    if not services.enforced():
        return True, _("This driver shares the host's network with open sandboxes: no fence (use egress).")
    held = fence.rules()
    current = fence.digest(held)
    rows = {row.node: row for row in Fence.objects.all()}
    for node in reachable_nodes():
        row = rows.get(node)
        if row is None or row.error or row.digest != current:
            reason = row.error if row is not None and row.error else _("not set yet")
            return False, interpolate_lazy(
                _("Not in force on node %(node)s (%(reason)s): set it with egress.set_fence."),
                {"node": node, "reason": reason},
            )
    if held["allow"]:
        return True, interpolate_lazy(
            _(
                "In force; open sandboxes also reach %(cidrs)s (sandbox.openAllowCidrs): make sure no host "
                "service there trusts them."
            ),
            {"cidrs": ", ".join(held["allow"])},
        )
    return True, _(
        "In force: open sandboxes reach the public internet, not the host or its private networks."
    )
