from django.db import models
from django.utils import timezone

from agents.choices import AgentStatus, ExitReason, PromptMode, StatusRule, StatusSource
from cocoon.ids import new_id


def new_agent_id() -> str:
    return new_id("ag")


def default_answers() -> list[list[str]]:
    return [["y", "Enter"], ["n", "Enter"], ["Enter"], ["Escape"]]


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
    # argv that picks up where the agent was after its sandbox restarted (e.g. claude --continue);
    # empty: it cannot resume.
    resume_command = models.JSONField(default=list)
    # argv that resumes exactly the agent's own CLI session, "{sessionId}" standing for its id; used
    # instead of resume_command once the CLI's hooks named the session (Agent.cli_session_id).
    resume_session_command = models.JSONField(default=list)
    # What the answer page offers a blocked agent: each answer a list of keys (agents.tmux.KEYS).
    answers = models.JSONField(default=default_answers)
    builtin = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.name


class Agent(models.Model):
    """A CLI in a tmux session of its sandbox; it outlives cocoond, which rediscovers it."""

    id = models.CharField(primary_key=True, max_length=40, default=new_agent_id, editable=False)
    sandbox = models.ForeignKey("sandboxes.Sandbox", on_delete=models.CASCADE, related_name="agents")
    profile = models.CharField(max_length=64)
    # What people call it (agents.services.default_name, or given; renamable); the id is the API's.
    name = models.CharField(max_length=80)
    status = models.CharField(max_length=10, choices=AgentStatus.choices, default=AgentStatus.UNKNOWN)
    status_at = models.DateTimeField(default=timezone.now)  # since when it has had that status
    status_source = models.CharField(
        max_length=10, choices=StatusSource.choices, default=StatusSource.HEURISTIC
    )
    # Why an `error`: the CLI hook's word (rate_limit, authentication_failed, ...) or an ErrorReason.
    status_reason = models.CharField(max_length=40, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    exit_reason = models.CharField(max_length=20, choices=ExitReason.choices, blank=True)
    # What it was started with, so that a resume gets the same providers and model (not the call's
    # one-off env, which may hold secrets).
    providers = models.JSONField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True)
    # The sandbox's boot (its PID 1's start time) when the session was started: a session gone after
    # the sandbox booted again was ended by an engine or host restart, not by the agent.
    sandbox_boot = models.CharField(max_length=20, blank=True)
    # What it may spend ({cost?, tokens?}, cocoon.schema.BUDGET); None: no limit of its own.
    budget = models.JSONField(null=True, blank=True)
    # A steering agent's: {ceilings: what its token may ask for (cocoon.schemas.CEILINGS), parent: the
    # token that spawned it, or None}; its token is made at each start and revoked when it ends.
    steering = models.JSONField(null=True, blank=True)
    # The task it works for (a step of a task's workflow), if any: its usage counts for the task too.
    task_id = models.CharField(max_length=40, blank=True, db_index=True)
    # The CLI's own session (Claude Code's session id, Codex's thread id) as its hooks last named it.
    cli_session_id = models.CharField(max_length=64, blank=True)
    # Why the status is what it is (agent.explain): the rule that decided and what it looked at.
    rule = models.CharField(max_length=20, choices=StatusRule.choices, default=StatusRule.SPAWNED)
    rule_detail = models.CharField(max_length=300, blank=True)
    # The last poll's view: hook report, foreground command, and what the last changed screen showed.
    hook_report = models.CharField(max_length=100, blank=True)
    foreground = models.CharField(max_length=100, blank=True)
    screen_hash = models.CharField(max_length=64, blank=True)
    screen_indicator = models.BooleanField(default=False)
    screen_question = models.CharField(max_length=300, blank=True)
    screen_error = models.CharField(max_length=40, blank=True)  # the ErrorReason the screen showed
    # The last screen the poller saw and the lines above it (bounded): agent.read of an agent that is
    # gone answers with these, marked as the last known screen.
    last_screen = models.TextField(blank=True)
    last_scrollback = models.TextField(blank=True)
    screen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity_at = models.DateTimeField(auto_now_add=True)  # the screen's last change
    last_input_at = models.DateTimeField(null=True, blank=True)  # a prompt at spawn counts

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return self.id
