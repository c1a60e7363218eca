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
from sandboxes.models import LOCAL_NODE

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


def node_dir(node: str) -> Path:
    """The files of a node's proxy: the local proxy's own folder, or a remote node's mirror here (the
    policy cocoond sends it, what it said back: egress.remote trades them through the node's engine)."""
    if node == LOCAL_NODE:
        return egress_dir()
    # In the node's own folder, which node.remove removes.
    return ensure_private_dir(ensure_private_dir(settings.DATA_DIR / "nodes" / node) / "egress")


def sandbox_nodes(sandbox_ids: set[str], reporter: str) -> dict[str, str]:
    """The node of each of these sandboxes, as a node's proxy names them in what it reports: one without
    a row (deleted since) counts as the local proxy's, which was told of it by this host, and as a
    remote node's only if that node had it (remember_gone): the proxy's last records come a few ticks
    after the sandbox's deletion."""
    from sandboxes.models import Sandbox

    found = dict(Sandbox.objects.filter(pk__in=sandbox_ids).values_list("pk", "node"))
    gone = set() if reporter == LOCAL_NODE or set(found) >= sandbox_ids else set(_gone(reporter))
    unknown = LOCAL_NODE if reporter == LOCAL_NODE else ""
    return {
        sandbox_id: found.get(sandbox_id, reporter if sandbox_id in gone else unknown)
        for sandbox_id in sandbox_ids
    }


GONE_KEPT_S = 3600  # how long a deleted sandbox's records from its node are still taken


def remember_gone(sandbox_id: str, node: str) -> None:
    """A sandbox of a remote node was deleted: what its proxy still reports of it counts for an hour."""
    with _locked():
        now = time.time()
        gone = {key: at for key, at in _gone(node).items() if now - at < GONE_KEPT_S}
        gone[sandbox_id] = now
        write_private_file(node_dir(node) / "gone.json", json.dumps(gone))


def _gone(node: str) -> dict[str, float]:
    try:
        gone = json.loads((node_dir(node) / "gone.json").read_text())
    except (OSError, ValueError):
        return {}
    return gone if isinstance(gone, dict) else {}


def remote_nodes_in_use() -> set[str]:
    """The remote nodes whose proxy has a policy: those with sandboxes on a network, and those that had
    (their policy must still lose the last one)."""
    from sandboxes.models import Node, Sandbox

    nodes = set(_networked(Sandbox.objects.exclude(node=LOCAL_NODE)).values_list("node", flat=True))
    nodes |= {path.parent.parent.name for path in (settings.DATA_DIR / "nodes").glob("*/egress/policy.json")}
    # Not a node removed meanwhile, whose folder a publish under way may have made again.
    return set(Node.objects.filter(pk__in=nodes).values_list("pk", flat=True)) if nodes else set()


def _networked(sandboxes: Any) -> Any:
    # Open sandboxes too: they reach the credential routes on their own network.
    return sandboxes.exclude(network=NetworkMode.NONE).exclude(state=SandboxState.MISSING)


def build_all() -> dict[str, dict[str, Any]]:
    """Each node's policy: the local one's, and one per remote node in use. A node's proxy knows only
    its own sandboxes (their addresses are its engine's, which other engines hand out again) and the
    routes of the providers granted to them."""
    from egress.models import ProviderGrant
    from sandboxes.drivers import get_driver
    from sandboxes.models import Sandbox

    document = config.get_settings()
    driver = get_driver()
    enforced = Capability.EGRESS_ENFORCED in driver.capabilities()
    grants: dict[str, list[str]] = {}
    for sandbox_id, provider_id in ProviderGrant.objects.values_list("sandbox_id", "provider"):
        grants.setdefault(sandbox_id, []).append(provider_id)
    nodes = {LOCAL_NODE: _node_policy(enforced)}
    nodes |= {node: _node_policy(True) for node in remote_nodes_in_use()}
    every_provider = providers.all_providers(document)
    project_keys = ProjectKeys(every_provider)
    for sandbox in _networked(Sandbox.objects.all()).only("id", "ips", "proxy_token", "node", "project_id"):
        node = nodes.get(sandbox.node)
        if node is None:  # a node removed meanwhile
            continue
        # A provider its project has no key of (none of its own, the server's not allowed) is not
        # granted; one it has a key of its own of goes with that key's headers.
        reached, keys = project_keys.of(str(sandbox.project_id), grants.get(sandbox.id, []))
        entry = {
            "id": sandbox.id,
            "token": sandbox.proxy_token,
            "allow": document["egress"]["sandboxAllow"].get(sandbox.id, []),
            "grants": reached,
            "keys": keys,
        }
        node["granted"].update(entry["grants"])
        node["ids"].add(sandbox.id)
        if not enforced and sandbox.node == LOCAL_NODE:
            node["tokens"][sandbox.proxy_token] = entry
        elif ip := (sandbox.ips or {}).get(driver.sandbox_network(sandbox.id)):
            node["sandboxes"][ip] = entry
    shared = {
        "allowlist": allowlist(document),
        "hosts": document["egress"]["hosts"],
        "caBundle": document["egress"]["caBundle"],
    }
    refuse = refusals()
    return {
        node_id: {
            **shared,
            "sandboxes": node["sandboxes"],
            "tokens": node["tokens"],
            "providers": _routes(every_provider, node["granted"], driver.host_alias),
            # Requests the credential proxy answers with a message instead (a budget spent, usage).
            "refuse": _refusals_of(refuse, node["ids"]),
        }
        for node_id, node in nodes.items()
    }


class ProjectKeys:
    """Which granted providers a project's sandboxes reach and with whose key (vault.read_secret): the
    server's (the route's headers), the project's own, or none (then the grant does not hold). Each
    (project, provider) looked up once per policy."""

    def __init__(self, every_provider: dict[str, Any]) -> None:
        self.every_provider = every_provider
        self.known: dict[tuple[str, str], tuple[bool, dict[str, str] | None]] = {}

    def of(self, project: str, granted: list[str]) -> tuple[list[str], dict[str, dict[str, str]]]:
        """Of the providers granted to one sandbox of project: those it reaches, and the headers of those
        it reaches with a key of its own."""
        reached: list[str] = []
        keys: dict[str, dict[str, str]] = {}
        for provider_id in sorted(granted):
            if (project, provider_id) not in self.known:
                self.known[project, provider_id] = self._look_up(project, provider_id)
            usable, headers = self.known[project, provider_id]
            reached += [provider_id] if usable else []
            keys |= {provider_id: headers} if headers is not None else {}
        return reached, keys

    def _look_up(self, project: str, provider_id: str) -> tuple[bool, dict[str, str] | None]:
        provider = self.every_provider.get(provider_id)
        if provider is None or provider.get("auth") == "none":
            return True, None
        own = providers.key_of(provider, project)
        if own == providers.key_of(provider):
            return bool(own), None
        return bool(own), providers.auth_headers(provider, own) if own else None


def _refusals_of(refuse: Refusals, sandbox_ids: set[str]) -> Refusals:
    """What one node's proxy refuses: of the sandboxes', only its own (agents are named by id alone)."""
    return Refusals(
        all=refuse["all"],
        sandboxes={key: text for key, text in refuse["sandboxes"].items() if key in sandbox_ids},
        agents=refuse["agents"],
        unnamed={key: text for key, text in refuse["unnamed"].items() if key in sandbox_ids},
    )


def _node_policy(enforced: bool) -> dict[str, Any]:
    sandboxes: dict[str, Any] = {}
    if not enforced:
        # The local proxy (bwrap): every sandbox and the host itself come from loopback.
        sandboxes[LOOPBACK] = {"id": None, "token": "", "allow": [], "grants": [], "shared": True}
    return {"sandboxes": sandboxes, "tokens": {}, "granted": set(), "ids": set()}


def _routes(every_provider: dict[str, Any], granted: set[str], host_alias: str) -> dict[str, Any]:
    routes = {}
    for provider_id, provider in every_provider.items():
        if provider_id in granted:
            routes[provider_id] = {
                **{
                    key: provider.get(key, "")
                    for key in ("kind", "baseUrl", "auth", "header", "prefix", "secret")
                },
                "headers": providers.auth_headers(provider, providers.key_of(provider)),
                # The proxy's localhost is its own container; the provider meant the server.
                "baseUrl": providers.reachable_base_url(provider["baseUrl"], host_alias),
            }
    return routes


@contextmanager
def _locked() -> Iterator[None]:
    """One writer at a time, across processes (cocoond and a separate Celery worker)."""
    with open(egress_dir() / "policy.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def current(node: str = LOCAL_NODE) -> dict[str, Any] | None:
    """The published policy; None if there is none or the file is not a policy (written by someone else)."""
    try:
        document = json.loads((node_dir(node) / "policy.json").read_text())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _ack(node: str, since: float | None = None) -> dict[str, Any]:
    """What the proxy last said (ack.json); with since, only if it said so after that time."""
    path = node_dir(node) / "ack.json"
    try:
        if since is not None and path.stat().st_mtime < since:
            return {}
        ack = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return ack if isinstance(ack, dict) else {}


def acknowledged(since: float | None = None, node: str = LOCAL_NODE) -> int | None:
    """The version the proxy has loaded; with since, only if it said so after that time."""
    version = _ack(node, since).get("version")
    return version if isinstance(version, int) else None


def refused(version: int | None = None, since: float | None = None, node: str = LOCAL_NODE) -> str | None:
    """Why the proxy refused a policy (it keeps serving the last one it could use): the newest refusal,
    or only one of at least the given version."""
    refusal = _ack(node, since).get("refused")
    if not isinstance(refusal, dict) or not isinstance(refusal.get("version"), int):
        return None
    if version is not None and refusal["version"] < version:
        return None
    return str(refusal.get("error", ""))[:500]


def forget_ack(node: str = LOCAL_NODE) -> None:
    (node_dir(node) / "ack.json").unlink(missing_ok=True)


def publish() -> dict[str, int]:
    """Write each node's policy that changed; returns the version that holds it, per node. Built under
    the lock: a document built before another writer's newer one must not be written after it (a lost
    revocation)."""
    versions = {}
    with _locked():
        for node, document in build_all().items():
            previous = current(node) or {}
            version = previous.get("version", 0)
            if {key: value for key, value in previous.items() if key != "version"} != document:
                # Milliseconds keep versions rising across a lost file; +1 across fast writes.
                version = max(version + 1, int(time.time() * 1000))
                text = json.dumps({"version": version, **document})
                write_private_file(node_dir(node) / "policy.json", text)
            versions[node] = version
    return versions


def wait_for_ack(version: int, timeout: float = 5.0) -> bool:
    """Whether the local proxy loaded this version (or a newer one) in time; False at once if it
    refused it."""
    deadline = time.monotonic() + timeout
    while True:
        acked = acknowledged()
        if acked is not None and acked >= version:
            return True
        if refused(version) is not None or time.monotonic() > deadline:
            return False
        time.sleep(ACK_POLL_S)
