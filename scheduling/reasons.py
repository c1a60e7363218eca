"""Why a task failed or was closed: stored as key + params, rendered in each reader's language."""

import json
from typing import Any

from django.utils import translation
from django.utils.translation import gettext_lazy as _

from cocoon.errors import CocoonError
from cocoon.i18n import LANGUAGES

CLOSING_REASONS: dict[str, Any] = {
    "step_exit": _("Step %(step)s: the agent exited with code %(code)s."),
    "step_timeout": _("Step %(step)s did not finish within %(timeout)s s."),
    "step_failed": _("Step %(step)s: the agent's turn failed (%(why)s); its screen ended with: %(screen)s"),
    "sandbox_gone": _("The task's sandbox %(sandbox)s is gone or not running."),
    "no_report": _("The last step wrote no report to %(path)s."),
    "report_not_json": _("The report %(path)s is not valid JSON: %(problem)s."),
    "report_invalid": _("The report %(path)s does not match its schema: %(problem)s."),
    "runner_lost": _("The run lost its worker %(attempts)s times and was given up."),
    "cancelled": _("Cancelled by %(actor)s."),
    "rejected": _("Rejected by %(actor)s."),
    "error": _("The run stopped with an error: %(message)s"),
    "budget_spent": _("Its budget is spent: %(spent)s of %(limit)s."),
    "budget_spent_agent": _("The budget of its agent %(subject)s is spent: %(spent)s of %(limit)s."),
    "budget_spent_sandbox": _("The budget of its sandbox %(subject)s is spent: %(spent)s of %(limit)s."),
    "budget_spent_day": _("Today's cap of all agents is spent: %(spent)s of %(limit)s."),
    "budget_spent_project": _("Today's cap of its project %(subject)s is spent: %(spent)s of %(limit)s."),
}


def closing_reason(key: str, **params: Any) -> dict[str, Any]:
    """The value of Task.reason: one of CLOSING_REASONS and its parameters."""
    return {"key": key, "params": params}


def closing_reason_from_error(error: CocoonError) -> dict[str, Any]:
    """An error of another service as a reason, its message kept in every language cocoon speaks."""
    messages = {}
    for language in LANGUAGES:
        with translation.override(language):
            rendered = error.render()
        details = json.dumps(rendered["details"], ensure_ascii=False)[:1000] if rendered["details"] else ""
        messages[language] = f"{rendered['message']} {details}".strip()
    return closing_reason("error", code=str(error.code), messages=messages)


def render_closing_reason(reason: dict[str, Any] | None, language: str) -> str | None:
    if not reason:
        return None
    params = reason["params"]
    if reason["key"] == "error":
        params = params | {"message": params["messages"].get(language) or params["messages"]["en"]}
    with translation.override(language):
        text: str = str(CLOSING_REASONS[reason["key"]]) % params
    return text
