"""A task's template (task.create params, a schedule's template too) and its workflow of agent steps:
checked and filled in when written, rendered into each step's prompt when run (SPEC §7)."""

import re
from typing import Any

from django.utils.translation import gettext_lazy as _

from agents.models import AgentProfile
from agents.profiles import ensure_profiles
from cocoon import config, tenancy
from cocoon.actors import Actor
from cocoon.errors import field, field_error, fields_error, interpolate_lazy
from egress.credentials import check_profile_secrets, choose
from egress.providers import all_providers
from sandboxes import services as sandboxes
from sandboxes.drivers.base import WORKSPACE
from scheduling.models import Task

DEFAULT_PROFILE = "claude-code"
DEFAULT_STEP_TIMEOUT_S = 3600
PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
# Written into the last step's prompt by {{reportInstructions}}; read by an agent, so not translated.
REPORT_INSTRUCTIONS = (
    "When you are finished, write a JSON report to the file {reportFile} (also in $COCOON_REPORT_FILE): "
    '{{"ok": true or false, "summary": "what you did, in one or two sentences", '
    '"autoClose": true only if nobody needs to look at the changes, "details": {{...optional}}}}.'
)
DEFAULT_STEP_PROMPT = "{{prompt}}\n\n{{reportInstructions}}"
PLACEHOLDERS = {"prompt", "taskId", "reportFile", "workdir", "step", "reportInstructions"}


def report_path(task_id: str) -> str:
    return f"{WORKSPACE}/.cocoon/report/{task_id}.json"


def check_workflow(workflow: list[dict[str, Any]] | None, path: str = "workflow") -> list[dict[str, Any]]:
    """The workflow with defaults filled in, or invalid_params naming every bad field.

    Profiles and providers are looked up now, so a task never fails hours later on a typo.
    """
    ensure_profiles()
    steps = workflow or [{"profile": DEFAULT_PROFILE}]
    profiles = set(
        AgentProfile.objects.filter(name__in={s["profile"] for s in steps}).values_list("name", flat=True)
    )
    providers = all_providers()
    errors = []
    normalized = []
    for index, step in enumerate(steps):
        if step["profile"] not in profiles:
            message = interpolate_lazy(_("There is no agent profile %(name)s."), {"name": step["profile"]})
            errors.append(field(f"{path}.{index}.profile", message, "unknown_profile"))
        template = step.get("prompt", DEFAULT_STEP_PROMPT)
        for name in sorted({match[1] for match in PLACEHOLDER.finditer(template)} - PLACEHOLDERS):
            message = interpolate_lazy(
                _("Unknown placeholder {{%(name)s}}; known are: %(known)s."),
                {"name": name, "known": ", ".join(sorted(PLACEHOLDERS))},
            )
            errors.append(field(f"{path}.{index}.prompt", message, "unknown_placeholder"))
        for position, provider in enumerate(step.get("providers", [])):
            if provider not in providers:
                message = interpolate_lazy(_("There is no provider %(name)s."), {"name": provider})
                errors.append(field(f"{path}.{index}.providers.{position}", message, "unknown_provider"))
        normalized.append(
            step | {"prompt": template, "timeoutS": step.get("timeoutS", DEFAULT_STEP_TIMEOUT_S)}
        )
    if errors:
        raise fields_error(errors)
    return normalized


def check_template(params: dict[str, Any], path: str = "") -> dict[str, Any]:
    """task.create params (a schedule's template too) with the workflow checked and filled in."""
    prefix = f"{path}." if path else ""
    if "sandboxId" in params and "sandbox" in params:
        raise field_error(f"{prefix}sandbox", _("Give either sandbox or sandboxId, not both."), "conflict")
    if params.get("sandboxId"):
        sandboxes.get_sandbox(params["sandboxId"])
    return params | {"workflow": check_workflow(params.get("workflow"), f"{prefix}workflow")}


def check_author(template: dict[str, Any], actor: Actor) -> None:
    """A task's sandbox and agents are started by the runner as the server, but what they get is the
    template author's choice: agent tokens get only the allowed network modes and no raw secrets, and
    nothing above their token's ceilings (the limits a sandbox gets, defaults included)."""
    if template.get("sandboxId"):  # (task.create's is checked before: registry.owned; a schedule's here)
        sandboxes.check_visible(actor, template["sandboxId"])
    else:
        options = template.get("sandbox", {})
        sandboxes.check_network_mode(options.get("network"), actor)
        limits = sandboxes.options_from(config.get_settings()["sandbox"], **options).limits
        tenancy.within_ceilings(actor, cpus=limits.cpus, memory_mb=limits.memory_mb)
        if project := options.get("project"):
            tenancy.project_named(project, actor)
    for step in template["workflow"]:
        secrets = AgentProfile.objects.get(pk=step["profile"]).secrets
        check_profile_secrets(secrets, actor)
        chosen = choose(step.get("providers"), secrets, actor.project)
        tenancy.within_ceilings(actor, providers=list(chosen))


def render_prompt(template: str, task: Task, step: int) -> str:
    values = {
        "prompt": task.prompt,
        "taskId": task.id,
        "reportFile": report_path(task.id),
        "workdir": WORKSPACE,
        "step": str(step + 1),
    }
    values["reportInstructions"] = REPORT_INSTRUCTIONS.format(reportFile=values["reportFile"])
    return PLACEHOLDER.sub(lambda match: values[match[1]], template)
