"""The proxy's policy: derived from settings, providers, secrets and the running egress sandboxes,
written atomically to DATA_DIR/egress/policy.json with a rising version; the proxy acknowledges each
version it has loaded in ack.json.
"""

import fcntl
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict

from django.conf import settings

from cocoon import config
from cocoon.datadir import ensure_private_dir, write_private_file
from egress import providers
from sandboxes.choices import Capability, NetworkMode, SandboxState

ACK_POLL_S = 0.01
LOOPBACK = "127.0.0.1"


def egress_dir() -> Path:
    return ensure_private_dir(settings.DATA_DIR / "egress")


def allowlist(document: dict[str, Any]) -> list[str]:
    """The settings' allowlist plus every provider's host (provider hosts are allowed automatically)."""
    hosts = list(document["egress"]["allowlist"])
    for provider in providers.all_providers(document).values():
        host = providers.host_of(provider["baseUrl"])
        if host not in hosts:
            hosts.append(host)
    return hosts


class Refusals(TypedDict):
    """What the credential proxy answers with a message instead of forwarding (images/egress-proxy)."""

    all: str  # every request
    sandboxes: dict[str, str]  # every request of these sandboxes
    agents: dict[str, str]  # the requests that name these agents
    unnamed: dict[str, str]  # the requests of these sandboxes that name no agent


_refusal_sources: list[Callable[[], Refusals]] = []


def register_refusals(source: Callable[[], Refusals]) -> None:
    """An upper layer's requests to refuse at the credential proxy (usage: budgets that are spent)."""
    _refusal_sources.append(source)


def refusals() -> Refusals:
    merged = Refusals(all="", sandboxes={}, agents={}, unnamed={})
    for source in _refusal_sources:
        found = source()
        merged["all"] = merged["all"] or found["all"]
        merged["sandboxes"] |= found["sandboxes"]
        merged["agents"] |= found["agents"]
        merged["unnamed"] |= found["unnamed"]
    return merged


def build() -> dict[str, Any]:
    from egress.models import ProviderGrant
    from sandboxes.drivers import get_driver
    from sandboxes.models import Sandbox

    document = config.get_settings()
    driver = get_driver()
    enforced = Capability.EGRESS_ENFORCED in driver.capabilities()
    sandboxes: dict[str, Any] = {}
    tokens: dict[str, Any] = {}
    grants: dict[str, list[str]] = {}
    for sandbox_id, provider_id in ProviderGrant.objects.values_list("sandbox_id", "provider"):
        grants.setdefault(sandbox_id, []).append(provider_id)
    # Open sandboxes too: they reach the credential routes on their own network.
    running = Sandbox.objects.exclude(network=NetworkMode.NONE).exclude(state=SandboxState.MISSING)
    for sandbox in running.only("id", "ips", "proxy_token"):
        entry = {
            "id": sandbox.id,
            "token": sandbox.proxy_token,
            "allow": document["egress"]["sandboxAllow"].get(sandbox.id, []),
            "grants": sorted(grants.get(sandbox.id, [])),
        }
        if not enforced:
            tokens[sandbox.proxy_token] = entry
        elif ip := (sandbox.ips or {}).get(driver.sandbox_network(sandbox.id)):
            sandboxes[ip] = entry
    if not enforced:
        # The local proxy (bwrap): every sandbox and the host itself come from loopback.
        sandboxes[LOOPBACK] = {"id": None, "token": "", "allow": [], "grants": [], "shared": True}
    granted = {provider for provider_ids in grants.values() for provider in provider_ids}
    routes = {}
    for provider_id, provider in providers.all_providers(document).items():
        if provider_id in granted:
            routes[provider_id] = {
                **{
                    key: provider.get(key, "")
                    for key in ("kind", "baseUrl", "auth", "header", "prefix", "secret")
                },
                "headers": providers.auth_headers(provider, providers.key_of(provider)),
                # The proxy's localhost is its own container; the provider meant the server.
                "baseUrl": providers.reachable_base_url(provider["baseUrl"], driver.host_alias),
            }
    return {
        "allowlist": allowlist(document),
        "hosts": document["egress"]["hosts"],
        "caBundle": document["egress"]["caBundle"],
        "sandboxes": sandboxes,
        "tokens": tokens,
        "providers": routes,
        # Requests the credential proxy answers with a message instead (a budget spent, usage).
        "refuse": refusals(),
    }


@contextmanager
def _locked() -> Iterator[None]:
    """One writer at a time, across processes (cocoond and a separate Celery worker)."""
    with open(egress_dir() / "policy.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def current() -> dict[str, Any] | None:
    """The published policy; None if there is none or the file is not a policy (written by someone else)."""
    try:
        document = json.loads((egress_dir() / "policy.json").read_text())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _ack(since: float | None = None) -> dict[str, Any]:
    """What the proxy last said (ack.json); with since, only if it said so after that time."""
    path = egress_dir() / "ack.json"
    try:
        if since is not None and path.stat().st_mtime < since:
            return {}
        ack = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return ack if isinstance(ack, dict) else {}


def acknowledged(since: float | None = None) -> int | None:
    """The version the proxy has loaded; with since, only if it said so after that time."""
    version = _ack(since).get("version")
    return version if isinstance(version, int) else None


def refused(version: int | None = None, since: float | None = None) -> str | None:
    """Why the proxy refused a policy (it keeps serving the last one it could use): the newest refusal,
    or only one of at least the given version."""
    refusal = _ack(since).get("refused")
    if not isinstance(refusal, dict) or not isinstance(refusal.get("version"), int):
        return None
    if version is not None and refusal["version"] < version:
        return None
    return str(refusal.get("error", ""))[:500]


def forget_ack() -> None:
    (egress_dir() / "ack.json").unlink(missing_ok=True)


def publish() -> int:
    """Write the policy if it changed; returns the version that holds it. Built under the lock: a
    document built before another writer's newer one must not be written after it (a lost revocation)."""
    with _locked():
        document = build()
        previous = current() or {}
        version = previous.get("version", 0)
        if {key: value for key, value in previous.items() if key != "version"} != document:
            # Milliseconds keep versions rising across a lost file; +1 across fast writes.
            version = max(version + 1, int(time.time() * 1000))
            write_private_file(egress_dir() / "policy.json", json.dumps({"version": version, **document}))
    return version


def wait_for_ack(version: int, timeout: float = 5.0) -> bool:
    """Whether the proxy loaded this version (or a newer one) in time; False at once if it refused it."""
    deadline = time.monotonic() + timeout
    while True:
        acked = acknowledged()
        if acked is not None and acked >= version:
            return True
        if refused(version) is not None or time.monotonic() > deadline:
            return False
        time.sleep(ACK_POLL_S)
