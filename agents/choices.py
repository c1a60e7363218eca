from django.db import models


class AgentStatus(models.TextChoices):
    WORKING = "working", "working"
    BLOCKED = "blocked", "blocked"  # needs a human decision: a permission prompt, a y/n question
    DONE = "done", "done"
    IDLE = "idle", "idle"
    EXITED = "exited", "exited"
    UNKNOWN = "unknown", "unknown"


class StatusSource(models.TextChoices):
    HOOK = "hook", "hook"
    HEURISTIC = "heuristic", "heuristic"


class PromptMode(models.TextChoices):
    ARGUMENT = "argument", "argument"  # appended to the command line
    STDIN = "stdin", "stdin"  # piped into the program
    TYPED = "typed", "typed"  # typed into the terminal after start
