"""The egress proxy's item on the setup checklist."""

from typing import Any

from django.utils.translation import gettext_lazy as _

from cocoon.errors import interpolate_lazy
from cocoon.setup import register_check
from egress import services


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
