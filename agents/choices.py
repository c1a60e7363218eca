from django.db import models


class AgentStatus(models.TextChoices):
    WORKING = "working", "working"
    BLOCKED = "blocked", "blocked"  # needs a human decision: a permission prompt, a y/n question
    DONE = "done", "done"
    # Its last turn ended on an error (not logged in, an API error): it did not do its task. Why is in
    # statusReason (an ErrorReason, or what the CLI's hook named).
    ERROR = "error", "error"
    IDLE = "idle", "idle"
    EXITED = "exited", "exited"
    UNKNOWN = "unknown", "unknown"


class ExitReason(models.TextChoices):
    """Why an agent ended."""

    EXITED = "exited", "exited"  # its program ended (with exitCode)
    KILLED = "killed", "killed through cocoon"
    SANDBOX_STOPPED = "sandbox_stopped", "sandbox stopped"
    ENGINE_RESTARTED = "engine_restarted", "engine or host restarted"  # its sandbox restarted under it
    SESSION_VANISHED = "session_vanished", "session vanished"


class StatusSource(models.TextChoices):
    HOOK = "hook", "hook"
    HEURISTIC = "heuristic", "heuristic"


class PromptMode(models.TextChoices):
    ARGUMENT = "argument", "argument"  # appended to the command line
    STDIN = "stdin", "stdin"  # piped into the program
    TYPED = "typed", "typed"  # typed into the terminal after start


class StatusRule(models.TextChoices):
    """Which rule decided an agent's status (agent.explain)."""

    SPAWNED = "spawned", "spawned"
    KILLED = "killed", "killed"
    RESUMED = "resumed", "resumed"
    SANDBOX_STOPPED = "sandbox_stopped", "sandbox stopped"
    SESSION_ENDED = "session_ended", "session ended"
    HOOK = "hook", "hook report"
    ERROR_ON_SCREEN = "error_on_screen", "error on screen"
    FOREGROUND_PROCESS = "foreground_process", "foreground process"
    SHELL_PROMPT = "shell_prompt", "shell prompt"
    QUESTION = "question", "question on screen"
    WORKING_INDICATOR = "working_indicator", "working indicator"
    START_UP_GRACE = "start_up_grace", "start-up grace"
    SCREEN_CHANGING = "screen_changing", "screen changing"
    SETTLING = "settling", "settling"
    QUIET_AFTER_TASK = "quiet_after_task", "quiet after a task"
    QUIET = "quiet", "quiet"


class ErrorReason(models.TextChoices):
    """Why an agent's turn failed, when its screen says so (its hook may name a reason of the CLI's own:
    authentication_failed, rate_limit, billing_error, invalid_request, server_error, max_output_tokens)."""

    NOT_LOGGED_IN = "not_logged_in", "not logged in"
    INVALID_API_KEY = "invalid_api_key", "invalid API key"
    API_ERROR = "api_error", "API error"
