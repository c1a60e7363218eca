"""The fence of open sandboxes: the public internet, never the host nor its private networks.

An open sandbox's bridge has a way out, and without a fence that way leads to every address the host
reaches: its own services on any of its addresses (Redis, PostgreSQL), the LAN and a cloud's metadata
service. The fence is a pair of netfilter chains of this instance's own on every node, set by a one-shot
helper container of the egress proxy's image (images/egress-proxy/fence.py) in the host's network
namespace: from COCOON_SANDBOX_SUBNETS, packets to the host (INPUT) are refused, forwarded ones to
private, shared, link-local, loopback, multicast and reserved ranges too; a sandbox's own bridge (its
egress proxy) and sandbox.openAllowCidrs stay reachable. Egress sandboxes are on internal networks
already; the fence holds for them too. The rules match the subnets, not each sandbox: a create costs
nothing, and only start, a change of the allowed CIDRs and a new node set them again."""

import contextlib
import hashlib
import ipaddress
import json
import logging
from typing import Any

from django.conf import settings

from cocoon import config
from egress.container import ensure_image
from egress.models import Fence
from sandboxes.nodes import node_driver, reachable_nodes

logger = logging.getLogger(__name__)

# Where no open sandbox may go (RFC 6890's special-purpose ranges a host or its LAN may answer on).
BLOCKED = (
    "0.0.0.0/8",  # this network
    "10.0.0.0/8",  # private (RFC 1918)
    "100.64.0.0/10",  # shared address space (carrier-grade NAT, some VPNs)
    "127.0.0.0/8",  # loopback
    "169.254.0.0/16",  # link-local: cloud metadata services
    "172.16.0.0/12",  # private
    "192.0.0.0/24",  # IETF protocol assignments
    "192.168.0.0/16",  # private
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, and the broadcast address
)
HELPER = "/opt/cocoon-egress/fence.py"


def chain() -> str:
    """This instance's chain (netfilter names are short: a digest of the instance name)."""
    return "COCOON-" + hashlib.sha256(settings.COCOON_INSTANCE.encode()).hexdigest()[:8]


def rules(document: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the fence holds, as the helper takes it."""
    document = document or config.get_settings()
    return {
        "chain": chain(),
        "sources": [settings.COCOON_SANDBOX_SUBNETS],
        "allow": list(document["sandbox"].get("openAllowCidrs", [])),
        "block": list(BLOCKED),
    }


def digest(held: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(held, sort_keys=True).encode()).hexdigest()


def set_fence(node: str, held: dict[str, Any] | None = None) -> None:
    """Set the fence on node; its Fence row says how that went. Raises the driver's error."""
    held = held or rules()
    try:
        _run(node, held)
    except Exception as error:
        Fence.objects.update_or_create(node=node, defaults={"digest": "", "error": str(error)})
        raise
    Fence.objects.update_or_create(node=node, defaults={"digest": digest(held), "error": ""})


def set_everywhere(*, changed_only: bool = False) -> None:
    """Set the fence on every node that answers (changed_only: where it holds other rules); a node that
    fails is logged and its row says why, the others are set all the same."""
    held = rules()
    current = digest(held)
    for node in reachable_nodes():
        if changed_only and Fence.objects.filter(node=node, digest=current).exists():
            continue
        try:
            set_fence(node, held)
        except Exception:
            logger.exception("could not set the open sandboxes' fence on node %s", node)


def _run(node: str, held: dict[str, Any]) -> None:
    tag, driver = ensure_image(node), node_driver(node)
    held = held | {"nameservers": _nameservers(driver, tag)}
    driver.run_host_helper(tag, ["python3", HELPER, json.dumps(held)]).checked()


def _nameservers(driver: Any, tag: str) -> list[str]:
    """The IPv4 name servers the engine gives a bridged container (the host's, or with systemd-resolved
    its upstream ones): its resolver asks them from inside the sandbox's namespace, often at a private
    address (a cloud's or a LAN's resolver), so they stay reachable on port 53."""
    shown = driver.run_host_helper(tag, ["cat", "/etc/resolv.conf"], host_network=False).checked()
    found = []
    for line in shown.stdout.decode(errors="replace").splitlines()[:100]:
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            with contextlib.suppress(ValueError):  # IPv6 (sandboxes have none), or no address
                found.append(str(ipaddress.IPv4Address(words[1])))
    return found
