"""What the node methods do: take an engine in as a node, change its labels and capacity, drain it,
remove it; and the activity entries and events that say so."""

import logging
import re
import shutil
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import activity, events, vault
from cocoon.actors import Actor
from cocoon.choices import Visibility
from cocoon.errors import Conflict, field_error, interpolate_lazy
from sandboxes import signals
from sandboxes.capacity import probe
from sandboxes.choices import SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.docker import remote
from sandboxes.models import LOCAL_NODE, Node, Sandbox
from sandboxes.nodes import LOCAL_NAME, forget_driver, get_node, key_secret, node_driver
from sandboxes.schemas import serialize_node
from sandboxes.services import stop_sandbox

logger = logging.getLogger(__name__)

# Never unix://: the local engine is the local node, and any other socket is none of an admin's business.
URL = re.compile(r"tcp://[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}")

events.register_types("node.updated", "node.removed", visibility=Visibility.ADMIN)
activity.register_messages(
    {
        "node.added": _("Node %(name)s was added."),
        "node.updated": _("Node %(name)s was changed."),
        "node.draining": _("Node %(name)s is draining: no new sandboxes go there."),
        "node.removed": _("Node %(name)s was removed."),
        "node.unreachable": _("Node %(name)s does not answer: %(error)s"),
        "node.back": _("Node %(name)s answers again."),
    },
    visibility=Visibility.ADMIN,
)


@dataclass(frozen=True)
class Tls:
    """What reaching a TLS engine takes: its CA (pinned), cocoon's certificate and key (PEM)."""

    ca: str
    cert: str
    key: str


def announce(node: Node, key: str, actor: Actor | None) -> None:
    """The activity entry and the node.updated event of a change of the node (its checks' too)."""
    activity.record(key, {"name": node.name, "error": node.error}, actor=actor)
    events.publish("node.updated", serialize_node(node))


def add_node(
    *,
    actor: Actor,
    name: str,
    url: str,
    tls: Tls | None,
    labels: dict[str, str],
    overrides: dict[str, Any],
) -> Node:
    """Check that the engine answers (with this TLS material) and take it in, ready; nothing is kept
    when it does not."""
    if not URL.fullmatch(url):
        raise field_error("url", _("Must be tcp://host:port."))
    if tls is None:
        # Its API is root on that host: never reachable without cocoon's certificate.
        raise field_error("tls", _("An engine reached over tcp:// needs tls (ca, cert, key)."), "required")
    if name == LOCAL_NAME or Node.objects.filter(name=name).exists():
        raise Conflict(_("A node named %(name)s exists already."), name=name)
    node = Node(name=name, url=url, ca=tls.ca, cert=tls.cert)
    folder = settings.DATA_DIR / "nodes" / node.id
    try:
        facts, capacity = probe(url, remote.tls_config(folder, tls.ca, tls.cert, tls.key))
        taken = _node_of_engine(facts["engineId"])
    except Exception as error:  # refused, unreachable, a certificate that does not match, not an engine
        shutil.rmtree(folder, ignore_errors=True)
        raise field_error(
            "url",
            interpolate_lazy(
                _("The engine at %(url)s did not answer: %(error)s"), {"url": url, "error": error}
            ),
            "unreachable",
        ) from None
    if taken:
        shutil.rmtree(folder, ignore_errors=True)
        raise Conflict(_("The engine at %(url)s is node %(name)s already."), url=url, name=taken)
    node.labels, node.overrides, node.facts, node.capacity = labels, overrides, facts, capacity
    node.checked_at = timezone.now()
    try:
        with transaction.atomic():
            node.save()
            vault.set_secret(key_secret(node.id), tls.key, actor=actor)
            activity.record("node.added", {"name": name}, actor=actor)
            events.publish("node.updated", serialize_node(node))
            # The toolbox follows once this commits (SandboxesConfig.ready() hears it).
            signals.node_added.send(Node, node=node)
    except BaseException as error:
        shutil.rmtree(folder, ignore_errors=True)
        if isinstance(error, IntegrityError):  # added by another call meanwhile
            raise Conflict(_("A node named %(name)s exists already."), name=name) from None
        raise
    return node


def _node_of_engine(engine_id: str) -> str | None:
    """The name of the node that is this engine already (the local one too), if any: one engine taken
    in twice would be counted, placed on and reconciled twice."""
    if not engine_id:
        return None
    if engine_id == get_driver().engine_id():
        return LOCAL_NAME
    return next(
        (
            node.name
            for node in Node.objects.exclude(pk=LOCAL_NODE)
            if node.facts.get("engineId") == engine_id
        ),
        None,
    )


def update_node(
    node_id: str,
    *,
    actor: Actor,
    labels: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Node:
    node = get_node(node_id)
    if labels is not None:
        node.labels = labels
    if overrides is not None:
        node.overrides = overrides
    with transaction.atomic():
        node.save(update_fields=["labels", "overrides", "updated_at"])  # not what a check writes
        announce(node, "node.updated", actor)
    return node


def drain_node(node_id: str, *, actor: Actor, undrain: bool = False, stop: bool = False) -> Node:
    """No new sandboxes there (undrain: they may go there again), also while and after it is away;
    with stop, its running sandboxes are stopped."""
    node = get_node(node_id)
    with transaction.atomic():
        Node.objects.filter(pk=node.pk).update(draining=not undrain, updated_at=timezone.now())
        node.refresh_from_db()
        announce(node, "node.updated" if undrain else "node.draining", actor)
    if stop and not undrain:
        running = Sandbox.objects.filter(node=node.id, state=SandboxState.RUNNING)
        for sandbox_id in running.values_list("pk", flat=True):
            stop_sandbox(sandbox_id, actor=actor)
    return node


def remove_node(node_id: str, *, actor: Actor) -> None:
    """Forget a node that holds no sandboxes (the local one stays)."""
    node = get_node(node_id)
    if node.id == LOCAL_NODE:
        raise Conflict(_("The local node cannot be removed."))
    # Drained first, committed: no create chooses it from now on; one that chose it before made its
    # row right after choosing, so the check below sees it.
    Node.objects.filter(pk=node.id).update(draining=True)
    if Sandbox.objects.filter(node=node.id).exists():
        Node.objects.filter(pk=node.id).update(draining=node.draining)
        raise Conflict(_("Node %(name)s still holds sandboxes: delete them first."), name=node.name)
    driver = node_driver(node.id)
    with transaction.atomic():
        node.delete()
        vault.delete_secret(key_secret(node_id), actor=actor, missing_ok=True)
        activity.record("node.removed", {"name": node.name}, actor=actor)
        events.publish("node.removed", {"id": node_id})
    # What cocoon made there goes too (its egress proxy, networks, the toolbox volume); a node that does
    # not answer keeps them, as it would keep anything of a server it no longer hears from.
    if node.reachable:
        try:
            driver.remove_instance_objects()
        except Exception:
            logger.warning("could not remove what this instance made on node %s", node.name, exc_info=True)
    forget_driver(node_id)
    shutil.rmtree(settings.DATA_DIR / "nodes" / node_id, ignore_errors=True)
