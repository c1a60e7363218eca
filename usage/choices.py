from django.db import models


class Scope(models.TextChoices):
    """Whose spending a budget limits."""

    AGENT = "agent", "agent"
    TASK = "task", "task"  # its agents together
    SANDBOX = "sandbox", "sandbox"  # the agents in it together
    DAY = "day", "day"  # all agents in one UTC day (settings usage.dailyCap)
    PROJECT = "project", "project"  # a project's agents in one UTC day (its quotas.dailyCost): "<id>/<day>"


class BudgetStatus(models.TextChoices):
    OK = "ok", "ok"
    WARNED = "warned", "warned"  # settings usage.notifyAt of it is spent
    EXCEEDED = "exceeded", "exceeded"  # all of it: its requests are refused
