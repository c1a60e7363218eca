"""Egress: the proxy's life, the policy's publication, denied attempts and the one-click allow."""

import json
import logging
import os
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db import transaction
from django.db.models import F
from django.utils.translation import gettext_lazy as _

from cocoon import activity, config, events
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import Conflict, Unavailable
from egress import policy, remote
from egress.container import attach, ensure_proxy, proxy_running, restart_proxy
from egress.local import ensure_local_proxy, local_proxy_running
from egress.models import DeniedAttempt, ProviderGrant
from egress.policy import LOOPBACK
from egress.schemas import serialize_denied
from sandboxes.choices import Capability, NetworkMode
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError, SandboxSpec
from sandboxes.models import LOCAL_NODE, Sandbox
from sandboxes.nodes import node_driver, node_of

logger = logging.getLogger(__name__)
T = TypeVar("T")
ACK_TIMEOUT_S = 10
# Denied attempts keep this many distinct hosts per sandbox; the rest are counted under OTHER_HOSTS
# (no host name: the one-click allow refuses it).
MAX_DENIED_HOSTS = 100
OTHER_HOSTS = "*"
SANDBOX_ID_MAX = 40  # the column's
MAX_COUNT = 10**9  # attempts one entry may claim
PROXY_URL = "http://cocoon-proxy:3128"
CREDENTIAL_URL = "http://cocoon-proxy:8080"
# The credential proxy is reached directly, never through the forward proxy.
NO_PROXY = "cocoon-proxy,localhost,127.0.0.1"

activity.register_messages(
    {
        "egress.allowed": _("Egress to %(host)s was allowed."),
        "egress.allowed_for_sandbox": _("Egress to %(host)s was allowed for sandbox %(sandbox)s."),
    }
)
events.register_types("egress.denied", visibility=Visibility.ADMIN)


def enforced() -> bool:
    return Capability.EGRESS_ENFORCED in get_driver().capabilities()


def prepare(spec: SandboxSpec) -> SandboxSpec:
    """Before a sandbox with network is created: where the driver enforces egress, the sandbox gets
    its own network with the proxy on it (cocoon-proxy: the credential routes in every mode, the only
    way out in egress mode). Egress sandboxes are pointed at the proxy (where the driver cannot enforce
    egress, at the local proxy on loopback, which they may also bypass)."""
    if spec.network == NetworkMode.NONE:
        return spec
    dns = spec.dns
    node = node_of(spec.sandbox_id)  # the proxy of the sandbox's own node (remote ones are engines)
    if node != LOCAL_NODE or enforced():
        network = node_driver(node).create_sandbox_network(spec.sandbox_id, spec.network)
        address = _engine_errors(attach, network, node)
        if spec.network != NetworkMode.EGRESS:
            return spec
        dns = [address]
        url, no_proxy = PROXY_URL, NO_PROXY
    elif spec.network == NetworkMode.EGRESS:
        url, no_proxy = f"http://{LOOPBACK}:{ensure_local_proxy()['forward']}", f"{LOOPBACK},localhost"
    else:
        return spec
    proxy_env = {"HTTP_PROXY": url, "HTTPS_PROXY": url, "NO_PROXY": no_proxy}
    env = spec.env | proxy_env | {name.lower(): value for name, value in proxy_env.items()}
    return replace(spec, env=env, dns=dns)


def credential_proxy_url() -> str:
    if enforced():
        return CREDENTIAL_URL
    return f"http://{LOOPBACK}:{ensure_local_proxy()['credential']}"


def _engine_errors(operation: Callable[..., T], *args: Any) -> T:
    try:
        return operation(*args)
    except DriverError:
        raise
    except Exception as error:  # an engine error while building or starting the proxy
        raise DriverError(str(error)) from error


def start_proxy() -> None:
    """Start the proxy (building its image first if needed) and wait until it has loaded the policy."""
    if not enforced():
        raise Conflict(_("The %(driver)s driver does not enforce egress."), driver=get_driver().kind)
    _engine_errors(ensure_proxy)
    try:
        sync(wait=True, node=LOCAL_NODE)
    except PolicyNotLoaded as error:
        if error.refused:
            raise
        # Running, yet deaf to its policy file: a wedged proxy is what the checklist's fix is for.
        restart_proxy()
        sync(wait=True, node=LOCAL_NODE)


class PolicyNotLoaded(Unavailable):
    """The proxy did not load the published policy: it refused it (refused says why), or said nothing."""

    def __init__(self, refused: str | None) -> None:
        self.refused = refused
        if refused is None:
            super().__init__(_("The egress proxy did not confirm its new policy."))
        else:
            super().__init__(
                _("The egress proxy refused its new policy and keeps serving the last one: %(reason)s"),
                reason=refused,
            )


def sync(wait: bool = True, node: str | None = None) -> None:
    """Publish the policy, and send the remote nodes theirs; with wait, return only once the running
    proxies have loaded it: node's alone if given (a create waits for its own node's proxy), else every
    node's (a revocation, an allowed host, a spent budget). A proxy that is not running loads the newest
    policy when it starts; one of a node that does not answer gets it when the node is back."""
    versions = policy.publish()
    waited = set() if not wait else ({node} if node else set(versions)) - {LOCAL_NODE}
    failed = remote.sync(versions, waited)
    if not wait:
        return
    if node in (None, LOCAL_NODE):
        proxied = proxy_running() if enforced() else local_proxy_running()
        if proxied and not policy.wait_for_ack(versions[LOCAL_NODE], ACK_TIMEOUT_S):
            raise PolicyNotLoaded(policy.refused(versions[LOCAL_NODE]))
    if failed:
        first = sorted(failed)[0]
        raise PolicyNotLoaded(policy.refused(versions[first], node=first))


def sync_quietly() -> None:
    """sync() without waiting, for signal handlers: a failure is logged, never the caller's problem."""
    try:
        sync(wait=False)
    except Exception:
        logger.exception("could not publish the egress policy")


def grant(sandbox: Any, provider_ids: list[str]) -> None:
    """Let the sandbox use these providers' credential routes (and wait until the proxy knows)."""
    created = [
        ProviderGrant.objects.get_or_create(sandbox=sandbox, provider=provider_id)[1]
        for provider_id in provider_ids
    ]
    if any(created):
        sync(wait=True, node=sandbox.node)


# -- denied attempts ----------------------------------------------------------------------------------


def collect_denied() -> int:
    """Move the proxy's denied.jsonl into the database; returns how many attempts it counted.

    The proxy already folds attempts per second; here each sandbox keeps at most MAX_DENIED_HOSTS
    distinct hosts, the rest are counted under OTHER_HOSTS, so a flood of random names makes a bounded
    number of rows and events."""
    return sum(_collect_denied(node) for node in [LOCAL_NODE, *policy.remote_nodes_in_use()])


def _collect_denied(node: str) -> int:
    path = policy.node_dir(node) / "denied.jsonl"
    taken = path.with_name("denied.jsonl.collecting")
    try:
        os.replace(path, taken)  # the proxy opens the file per write, so it starts a new one
    except FileNotFoundError:
        return 0
    entries: list[dict[str, Any]] = []
    for line in taken.read_bytes().decode(errors="replace").splitlines():
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            entries.append(parsed)
        else:
            logger.warning("skipping a malformed denied entry")
    taken.unlink()
    # A node's proxy speaks only for its own sandboxes: an attempt it puts on another's is nobody's.
    named = {str(entry.get("sandboxId") or "")[:SANDBOX_ID_MAX] for entry in entries} - {""}
    owners = policy.sandbox_nodes(named, node)
    hosts: dict[str, set[str]] = {}
    changed, counted = {}, 0
    with transaction.atomic():
        for entry in entries:
            try:
                sandbox_id = str(entry.get("sandboxId") or "")[:SANDBOX_ID_MAX]
                at = datetime.fromtimestamp(float(entry.get("at", 0)), tz=UTC)
                first = datetime.fromtimestamp(float(entry.get("first", entry.get("at", 0))), tz=UTC)
                count = min(max(1, int(entry.get("count") or 1)), MAX_COUNT)
                port = int(entry.get("port") or 0)
                key: dict[str, Any] = {
                    "sandbox_id": sandbox_id if owners.get(sandbox_id) == node else "",
                    "host": str(entry.get("host", ""))[:300],
                    "port": port if 0 <= port <= 65535 else 0,
                    "reason": str(entry.get("reason", ""))[:32],
                }
            except (TypeError, ValueError, OverflowError):
                logger.warning("skipping a malformed denied entry")
                continue
            sandbox_hosts = hosts.get(key["sandbox_id"])
            if sandbox_hosts is None:
                rows = DeniedAttempt.objects.filter(sandbox_id=key["sandbox_id"])
                sandbox_hosts = hosts[key["sandbox_id"]] = set(rows.values_list("host", flat=True))
            if key["host"] not in sandbox_hosts:
                if len(sandbox_hosts) >= MAX_DENIED_HOSTS:
                    key |= {"host": OTHER_HOSTS, "port": 0}
                sandbox_hosts.add(key["host"])
            row, created = DeniedAttempt.objects.get_or_create(
                **key,
                defaults={"source": str(entry.get("source", ""))[:64], "first_at": first, "last_at": at}
                | {"count": count},
            )
            if not created:
                DeniedAttempt.objects.filter(pk=row.pk).update(count=F("count") + count, last_at=at)
            changed[row.pk] = row
            counted += count
    for row in DeniedAttempt.objects.filter(pk__in=changed):
        events.publish("egress.denied", serialize_denied(row), sandbox_id=row.sandbox_id or None)
    return counted


def list_denied(sandbox_id: str | None = None, limit: int = 100) -> list[DeniedAttempt]:
    collect_denied()
    rows = DeniedAttempt.objects.all()
    if sandbox_id:
        rows = rows.filter(sandbox_id=sandbox_id)
    return list(rows[:limit])


@transaction.atomic
def allow(host: str, *, actor: Actor, sandbox_id: str | None = None) -> list[str]:
    """The one-click allow: add host to the allowlist (or to one sandbox's own list); returns the
    allowlist."""
    document = config.get_settings()["egress"]
    if sandbox_id:
        from sandboxes.services import get_sandbox

        get_sandbox(sandbox_id)
        hosts = document["sandboxAllow"].get(sandbox_id, [])
        patch: dict[str, Any] = {"egress": {"sandboxAllow": {sandbox_id: sorted({*hosts, host})}}}
        key, params = "egress.allowed_for_sandbox", {"host": host, "sandbox": sandbox_id}
    else:
        patch = (
            {"egress": {"allowlist": [*document["allowlist"], host]}}
            if host not in document["allowlist"]
            else {}
        )
        key, params = "egress.allowed", {"host": host}
    if patch:
        config.update_settings(patch, actor=actor)
    DeniedAttempt.objects.filter(host=host, **({"sandbox_id": sandbox_id} if sandbox_id else {})).delete()
    activity.record(key, params, actor=actor, sandbox_id=sandbox_id or "")
    transaction.on_commit(lambda: sync(wait=True))
    return config.get_settings()["egress"]["allowlist"]


def watch_proxy() -> None:
    from sandboxes.choices import SandboxState

    if not enforced():
        return
    running = Sandbox.objects.filter(node=LOCAL_NODE, state=SandboxState.RUNNING)  # remote: egress.remote
    needed = running.exclude(network=NetworkMode.NONE).exists()
    if needed and not proxy_running():
        logger.warning("the egress proxy is down: starting it again")
        ensure_proxy()
