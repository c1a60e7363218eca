from django.db import models

from agents.choices import AgentStatus, PromptMode, StatusRule, StatusSource
from cocoon.ids import new_id


def new_agent_id() -> str:
    return new_id("ag")


class AgentProfile(models.Model):
    """An agent type: which command runs, how it gets its first prompt, and how its screen is read."""

    name = models.CharField(primary_key=True, max_length=64)
    command = models.JSONField()  # argv
    prompt_mode = models.CharField(max_length=10, choices=PromptMode.choices, default=PromptMode.TYPED)
    env = models.JSONField(default=dict)
    secrets = models.JSONField(default=list)  # names of secrets handed to the agent through its env file
    hooks = models.BooleanField(default=False)
    working_pattern = models.CharField(max_length=200, blank=True)
    blocked_patterns = models.JSONField(default=list)
    default_model = models.CharField(max_length=200, blank=True)
    builtin = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.name


class Agent(models.Model):
    """A CLI in a tmux session of its sandbox; it outlives cocoond, which rediscovers it."""

    id = models.CharField(primary_key=True, max_length=40, default=new_agent_id, editable=False)
    sandbox = models.ForeignKey("sandboxes.Sandbox", on_delete=models.CASCADE, related_name="agents")
    profile = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=AgentStatus.choices, default=AgentStatus.UNKNOWN)
    status_source = models.CharField(
        max_length=10, choices=StatusSource.choices, default=StatusSource.HEURISTIC
    )
    exit_code = models.IntegerField(null=True, blank=True)
    # Why the status is what it is (agent.explain): the rule that decided and what it looked at.
    rule = models.CharField(max_length=20, choices=StatusRule.choices, default=StatusRule.SPAWNED)
    rule_detail = models.CharField(max_length=300, blank=True)
    # The last poll's view: hook report, foreground command, and what the last changed screen showed.
    hook_report = models.CharField(max_length=100, blank=True)
    foreground = models.CharField(max_length=100, blank=True)
    screen_hash = models.CharField(max_length=64, blank=True)
    screen_indicator = models.BooleanField(default=False)
    screen_question = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity_at = models.DateTimeField(auto_now_add=True)  # the screen's last change
    last_input_at = models.DateTimeField(null=True, blank=True)  # a prompt at spawn counts

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return self.id
