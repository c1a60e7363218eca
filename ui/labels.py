"""The words the UI shows for the API's values (statuses, states, status rules and sources), in the page's
language; the raw value stays the tooltip's, and the classes and the API's."""

from django.utils.translation import gettext_lazy as _

# Agents', tasks' and steps' statuses, sandboxes' and nodes' states: one word for a value in all of them.
STATES = {
    "working": _("working"),
    "blocked": _("waits for you"),
    "done": _("done"),
    "error": _("error"),
    "idle": _("idle"),
    "exited": _("ended"),
    "unknown": _("unknown"),
    "creating": _("creating"),
    "running": _("running"),
    "stopped": _("stopped"),
    "missing": _("missing"),
    "queued": _("queued"),
    "review": _("in review"),
    "failed": _("failed"),
    "cancelled": _("cancelled"),
    "pending": _("pending"),
    "ready": _("ready"),
    "draining": _("draining"),
    "unreachable": _("unreachable"),
}
RULES = {
    "spawned": _("just started"),
    "killed": _("stopped through cocoon"),
    "resumed": _("resumed"),
    "sandbox_stopped": _("its sandbox stopped"),
    "session_ended": _("its session ended"),
    "hook": _("the CLI's own report"),
    "error_on_screen": _("an error on its screen"),
    "foreground_process": _("a command running"),
    "shell_prompt": _("a shell prompt"),
    "question": _("a question on its screen"),
    "working_indicator": _("its working indicator"),
    "start_up_grace": _("starting up"),
    "screen_changing": _("its screen changing"),
    "settling": _("its screen settling"),
    "quiet_after_task": _("quiet after a task"),
    "quiet": _("a quiet screen"),
}
SOURCES = {"hook": _("hook"), "heuristic": _("screen")}
# By the data-field the value is shown in (app.js shows live values with the same words).
LABELS = {"status": STATES, "state": STATES, "rule": RULES, "statusSource": SOURCES}


def word(field: str, value: str) -> str:
    """The word for a value of a field, in the active language; a value (or field) without one as it is."""
    return str(LABELS.get(field, {}).get(value, value))


def words() -> dict[str, dict[str, str]]:
    """Every field's words in the active language, for app.js."""
    return {field: {value: str(label) for value, label in labels.items()} for field, labels in LABELS.items()}
