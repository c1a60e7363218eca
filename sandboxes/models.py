import secrets
from typing import Self

from django.db import models
from django.utils.translation import gettext_lazy as _

from cocoon import tenancy
from cocoon.actors import Actor
from cocoon.errors import Conflict
from cocoon.ids import new_id
from sandboxes.choices import NetworkMode, NodeState, SandboxState


def new_sandbox_id() -> str:
    return new_id("sb")


def new_proxy_token() -> str:
    return secrets.token_hex(16)


def new_node_id() -> str:
    return new_id("nd")


# The local engine's node (DOCKER_HOST, or the engine's default socket): every install has it.
LOCAL_NODE = "nd_local"


class Node(models.Model):
    """An engine sandboxes run on (sandboxes.nodes): the local one, or one reached over its remote API.

    The client key for a TLS engine is in the vault (NODE_<ID>_KEY), never in the row.
    """

    id = models.CharField(primary_key=True, max_length=40, default=new_node_id, editable=False)
    name = models.CharField(max_length=63, unique=True)
    url = models.CharField(max_length=300, blank=True)  # "": the local engine
    ca = models.TextField(blank=True)  # PEM: the CA the engine's certificate must come from (pinned)
    cert = models.TextField(blank=True)  # PEM: cocoon's client certificate
    labels = models.JSONField(default=dict)
    # What it can hold: {cpus, memoryMb, maxSandboxes}, read from the engine, then the admin's overrides.
    capacity = models.JSONField(default=dict)
    overrides = models.JSONField(default=dict)
    # Two facts apart: an admin's drain survives the node going away and coming back.
    draining = models.BooleanField(default=False)  # no new sandboxes go there
    reachable = models.BooleanField(default=True)  # its last check got an answer
    facts = models.JSONField(default=dict)  # the engine's version, runtimes, live-restore, os, arch
    error = models.TextField(blank=True)  # why its last check failed ("" when it answered)
    checked_at = models.DateTimeField(null=True, blank=True)  # its last check that got an answer
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def state(self) -> str:
        if not self.reachable:
            return NodeState.UNREACHABLE
        return NodeState.DRAINING if self.draining else NodeState.READY


# The pool field of a member being removed: no template has this key, so no claim can take it.
POOL_REMOVING = "-"


class SandboxQuerySet(models.QuerySet["Sandbox"]):
    def claimed(self) -> "SandboxQuerySet":
        """The sandboxes users see: not the warm pools' members."""
        return self.filter(pool="")

    def visible_to(self, actor: Actor) -> "SandboxQuerySet":
        """The claimed sandboxes actor may see (cocoon.tenancy's rule)."""
        return self.claimed().filter(tenancy.visible(actor))


class Sandbox(tenancy.Owned):
    """A sandbox: one container (or bwrap folder) with a git workspace, where agents run. Its owner
    (tenancy.Owned): a warm pool's member gets the claiming actor's at the claim.

    The row is what cocoon intends; reconcile() aligns state and IPs with what the engine reports.
    """

    id = models.CharField(primary_key=True, max_length=40, default=new_sandbox_id, editable=False)
    name = models.CharField(max_length=100)  # unique in its project: another's names are not known
    image = models.CharField(max_length=300)
    network = models.CharField(max_length=10, choices=NetworkMode.choices)
    cpus = models.FloatField()
    memory_mb = models.PositiveIntegerField()
    pids = models.PositiveIntegerField()
    runtime = models.CharField(max_length=50, blank=True)
    driver = models.CharField(max_length=20)
    state = models.CharField(max_length=10, choices=SandboxState.choices, default=SandboxState.CREATING)
    error = models.TextField(blank=True)
    ips = models.JSONField(default=dict)
    repo = models.CharField(max_length=2000, blank=True)
    branch = models.CharField(max_length=255, blank=True)
    # The sandbox's part of its credential-proxy placeholders (cocoon_<token>_<NAME>); the proxy also
    # checks the source address, so it is no key by itself.
    proxy_token = models.CharField(max_length=64, default=new_proxy_token, editable=False)
    # Set while the sandbox waits in a warm pool (sandboxes.pools): the key of its template. Cleared
    # when a create claims it; until then no method shows or reaches it.
    pool = models.CharField(max_length=32, blank=True, db_index=True)
    # The engine's id of the image a pool member was made from: a rebuild of its tag replaces it.
    pool_image_id = models.CharField(max_length=100, blank=True)
    # What its agents may spend together (schema.BUDGET), judged by usage.budgets.
    budget = models.JSONField(null=True, blank=True)
    # The node it runs on (a Node's id; not a foreign key: the local node's row is made on first use).
    node = models.CharField(max_length=40, default=LOCAL_NODE, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SandboxQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="sandbox_name_per_project")]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    def ensure_running(self) -> Self:
        """This sandbox, or conflict when it is not running: every operation inside a sandbox needs one."""
        if self.state != SandboxState.RUNNING:
            raise Conflict(_("Sandbox %(name)s is %(state)s, not running."), name=self.name, state=self.state)
        return self
