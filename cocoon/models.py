from django.conf import settings
from django.db import models
from django.utils import timezone

from cocoon.choices import Role, TokenScope
from cocoon.ids import new_id


def new_token_id() -> str:
    return new_id("tok")


class Project(models.Model):
    """Who owns sandboxes and what hangs off them (cocoon.tenancy); "default" is made at migration."""

    id = models.SlugField(primary_key=True, max_length=63)
    name = models.CharField(max_length=100)
    # What its sandboxes and agents may take at once (cocoon.schemas.QUOTAS); a quota not set: no limit.
    quotas = models.JSONField(default=dict)
    # Whether its sandboxes may use the server's secrets where it has none of its own (an admin's say; a
    # new project may not, projects there before projects had secrets may).
    server_secrets = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A person's place in a project: their role there (cocoon.choices.Role)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    # The person's share of the project's (cocoon.schemas.QUOTAS without dailyCost): what the sandboxes
    # they created take, and the agents in them; a quota not set: no limit of their own.
    quotas = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id"]
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_project")]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.project_id} ({self.role})"


class Preference(models.Model):
    """What a person chose for themselves, kept with them rather than in one browser: the UI's language."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="preference"
    )
    language = models.CharField(max_length=10, blank=True)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.language}"


class SsoIdentity(models.Model):
    """Which person a single sign-on provider's subject is (cocoon.sso): linked by the provider's stable
    id, never by a name the provider lets someone choose."""

    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="one_person_per_subject")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def live(self) -> "ApiTokenQuerySet":
        """The tokens that work now: not expired (revoked ones are not in the table)."""
        return self.filter(models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=timezone.now()))


class ApiToken(models.Model):
    """A bearer token. Only the SHA-256 of the plain token is stored; the plain one is shown once."""

    id = models.CharField(primary_key=True, max_length=40, default=new_token_id, editable=False)
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=10, choices=TokenScope.choices)
    token_hash = models.CharField(max_length=64, unique=True)
    # An agent token acts in one project (admin tokens in none: they see all), and if own_sandboxes only
    # on the sandboxes it created itself.
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    # The most an agent token may ask for (cocoon.actors.Ceilings; cocoon.schemas.CEILINGS): {} none.
    ceilings = models.JSONField(default=dict, blank=True)
    # What of its budget ceiling it has carved out for what it made ({cost?, tokens?}): never given back.
    carved = models.JSONField(default=dict, blank=True)
    own_sandboxes = models.BooleanField(default=False)
    # A steering agent's token (agent.spawn {steering}): revoked when that agent ends, and with it every
    # token made below it (parent: the token of the agent that spawned it, if it had one).
    agent = models.CharField(max_length=40, blank=True, db_index=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    # A user-scope token's person: it acts as they do at each call (in project, if they are a member).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # The token written to admin-token.txt on first start; revoking it also removes that file.
    bootstrap = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)  # None: never

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope})"

    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()


class RevokedToken(models.Model):
    """What is left of a revoked token: its digest, so that whoever still presents it is told so
    (token_revoked) rather than that it never existed, and is not counted as guessing."""

    token_hash = models.CharField(primary_key=True, max_length=64)
    token_id = models.CharField(max_length=40)
    name = models.CharField(max_length=100)
    revoked_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.name} (revoked)"


class Secret(models.Model):
    """A named secret, encrypted at rest with the key in COCOON_DATA/secrets.key."""

    name = models.CharField(primary_key=True, max_length=64)
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def new_invite_id() -> str:
    return new_id("inv")


class Invite(models.Model):
    """A one-time link (cocoon.invites) that makes whoever opens it, logged in or signing up, a member of a
    project in a role. Only the SHA-256 of its secret is stored."""

    id = models.CharField(primary_key=True, max_length=40, default=new_invite_id, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invites")
    role = models.CharField(max_length=10, choices=Role.choices)
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.project_id} {self.role} ({self.id})"


class ProjectSecret(models.Model):
    """A project's own secret (its ANTHROPIC_API_KEY, GITHUB_TOKEN): for its sandboxes it stands before the
    server's secret of that name (cocoon.vault.read_secret). Encrypted as the server's are."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=64)
    ciphertext = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_secret_per_name")]

    def __str__(self) -> str:
        return f"{self.project_id}/{self.name}"


class SettingsDocument(models.Model):
    """The single row holding what users changed of the settings document (defaults live in code).

    Its existence marks that first-run setup has happened, so COCOON_CONFIG is applied only once.
    """

    overrides = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return "settings"


class ActivityEntry(models.Model):
    """One line of the activity log, stored as a message key + params and rendered per reader."""

    key = models.CharField(max_length=100)
    params = models.JSONField(default=dict)
    actor = models.CharField(max_length=140, blank=True)
    project = models.CharField(max_length=63, blank=True)  # whose (cocoon.tenancy); "": the server's
    sandbox_id = models.CharField(max_length=40, blank=True, db_index=True)
    agent_id = models.CharField(max_length=40, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "activity entries"

    def __str__(self) -> str:
        return self.key
