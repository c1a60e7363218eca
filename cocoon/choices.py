from django.db import models


class TokenScope(models.TextChoices):
    ADMIN = "admin", "admin"
    AGENT = "agent", "agent"
    USER = "user", "user"  # a person's own: it acts with that person's rights, as they are at each call


class Role(models.TextChoices):
    """What a person may do in a project (cocoon.tenancy)."""

    OWNER = "owner", "owner"  # everything in it, its members too
    MEMBER = "member", "member"  # create and drive sandboxes, agents, tasks, schedules
    VIEWER = "viewer", "viewer"  # read: lists, screens, diffs, usage; nothing that changes state


# Which role holds more: of two grants (groups, an invite and a membership) the higher stands.
ROLE_RANK: dict[str, int] = {Role.VIEWER: 0, Role.MEMBER: 1, Role.OWNER: 2}


class NetworkMode(models.TextChoices):
    """How a sandbox reaches the network; the core's settings schema names them, so they live here."""

    NONE = "none", "none"  # loopback only
    # Each sandbox with network has its own, shared only with the egress proxy.
    EGRESS = "egress", "egress"  # an internal network; the egress proxy is the way out
    OPEN = "open", "open"  # a bridge with free internet


class ProviderKind(models.TextChoices):
    """The API a model provider speaks: its environment variables and test request follow from it."""

    ANTHROPIC = "anthropic", "anthropic"
    OPENAI = "openai", "openai"
    HTTP = "http", "http"


class Visibility(models.TextChoices):
    """Who may read an event or an activity entry: admins only, or agent-scoped tokens too."""

    ADMIN = "admin", "admin"
    AGENT = "agent", "agent"


class AttentionKind(models.TextChoices):
    """What an attention item is about (the attention app); notification channels filter by it."""

    AGENT_BLOCKED = "agent_blocked", "agent blocked"  # it waits for a decision (its question shown)
    AGENT_DONE = "agent_done", "agent done"  # it finished its task and waits for the next
    AGENT_FAILED = "agent_failed", "agent failed"  # its turn ended on an error: it did not do its task
    AGENT_EXITED = "agent_exited", "agent exited"  # with a non-zero code, or for a reason not its own
    TASK_REVIEW = "task_review", "task needs review"
    TASK_FAILED = "task_failed", "task failed"
    SCHEDULE_FAILED = "schedule_failed", "schedule could not start a run"
    SETUP = "setup", "setup checklist"  # an item of the setup checklist is not ok
    BUDGET = "budget", "budget"  # an agent's, a task's or the daily budget is nearly or wholly spent


class ChannelType(models.TextChoices):
    """How a notification channel is reached."""

    APPRISE = "apprise", "apprise"  # an Apprise URL: Slack, Discord, Matrix, ntfy, email, ...
    WEBHOOK = "webhook", "signed webhook"  # a JSON POST signed with the channel's secret
