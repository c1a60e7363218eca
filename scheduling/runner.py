"""A task run: its sandbox, one agent per workflow step, the report, then done or review (SPEC §7).

The run's progress lives in the task row (current step, each step's agent and start time), and the
agents live in tmux in the sandbox; so a runner that takes over a task whose worker died picks up the
step where it stood and keeps waiting for the same agent, with the same deadline.
"""

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, connection
from django.utils import timezone
from jsonschema import Draft202012Validator

from agents import poller
from agents import services as agents
from agents.choices import AgentStatus
from agents.models import Agent
from agents.schemas import screen_tail
from cocoon import activity, tenancy
from cocoon.actors import SYSTEM_ACTOR
from cocoon.errors import CocoonError, InternalError, NotFound
from sandboxes import files, git, pools
from sandboxes import services as sandboxes
from sandboxes.choices import SandboxState
from sandboxes.models import Sandbox
from sandboxes.schemas import serialize_diff
from scheduling import services, workflow
from scheduling.choices import StepStatus, TaskStatus
from scheduling.dispatch import STALE_AFTER_S, claim_task, new_runner_token
from scheduling.events import publish_task_updated
from scheduling.models import Task
from scheduling.reasons import closing_reason, closing_reason_from_error

logger = logging.getLogger(__name__)

HEARTBEAT_S = 10  # how often a run says it is alive and checks it was not cancelled; < STALE_AFTER_S
MAX_ATTEMPTS = 3  # runners a task may lose before it is given up
REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "summary": {"type": "string"},
        "autoClose": {"type": "boolean"},
        "details": {},
    },
    "required": ["ok", "summary"],
}
REPORT_VALIDATOR = Draft202012Validator(REPORT_SCHEMA)
# The report folder exists before the first agent starts, and git ignores .cocoon/, so the report
# never shows in the task's diff.
PREPARE = """
mkdir -p .cocoon/report
grep -qsx '/.cocoon/' .git/info/exclude || echo '/.cocoon/' >> .git/info/exclude
"""


# The failures of a step that something outside the run can explain (its agent refused, then ending).
STEP_FAILURES = {"step_exit", "step_failed", "step_timeout", "no_report", "report_not_json", "report_invalid"}
FAILED_SCREEN_LINES = 3  # of a failed agent's screen, in its task's reason: what it said went wrong
_explanations: list[Callable[[Task], dict[str, Any] | None]] = []


def register_explanation(explain: Callable[[Task], dict[str, Any] | None]) -> None:
    """An upper layer's reason for a step's failure, named instead of it (usage: a spent budget, whose
    refused requests made the step's CLI exit or end without its report)."""
    _explanations.append(explain)


def explained(task: Task, reason: dict[str, Any]) -> dict[str, Any]:
    if reason["key"] in STEP_FAILURES:
        for explain in _explanations:
            if (better := explain(task)) is not None:
                return better
    return reason


class Abandoned(Exception):
    """The run is no longer this runner's: the task was cancelled or another runner took it over."""


class StepFailed(Exception):
    def __init__(self, reason: dict[str, Any]) -> None:
        super().__init__(reason["key"])
        self.reason = reason


class Heartbeat:
    """Keeps a run's heartbeat fresh from a thread of its own while the runner is busy elsewhere (a
    clone may take minutes), so only a dead worker's run looks stale."""

    def __init__(self, task_id: str, token: str) -> None:
        self.owned = Task.objects.filter(pk=task_id, runner=token, status=TaskStatus.RUNNING)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name=f"heartbeat-{task_id}", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        self.thread.join()

    def _beat(self) -> None:
        try:
            while not self.stopped.wait(HEARTBEAT_S):
                try:
                    self.owned.update(heartbeat_at=timezone.now())
                except DatabaseError:
                    logger.warning("a heartbeat was lost; the next one follows in %s s", HEARTBEAT_S)
        finally:
            connection.close()


def drive_task(task_id: str, stale_after_s: float = STALE_AFTER_S) -> str | None:
    """Drive a task to review or a final status; returns that status, or None if it was not ours."""
    token = new_runner_token()
    task = claim_task(task_id, token, stale_after_s)
    if task is None:
        return None
    return Run(task, token).drive()


class Run:
    def __init__(self, task: Task, token: str) -> None:
        self.task = task
        self.token = token

    # -- bookkeeping --------------------------------------------------------------------------------

    def _save(self, *fields: str) -> None:
        """Write fields only while the run is still ours (Abandoned otherwise); also a heartbeat."""
        now = timezone.now()
        values = {name: getattr(self.task, name) for name in fields}
        owned = Task.objects.filter(pk=self.task.pk, runner=self.token, status=TaskStatus.RUNNING)
        if not owned.update(heartbeat_at=now, updated_at=now, **values):
            raise Abandoned
        if fields:
            self.task.updated_at = now
            publish_task_updated(self.task)

    def _owned(self) -> bool:
        return Task.objects.filter(pk=self.task.pk, runner=self.token, status=TaskStatus.RUNNING).exists()

    def _fail(self, reason: dict[str, Any]) -> str | None:
        if not self._owned():
            return None
        state = self.task.steps[self.task.current_step]
        if state["status"] in {StepStatus.RUNNING, StepStatus.BLOCKED}:
            state |= {"status": StepStatus.FAILED, "finishedAt": timezone.now().isoformat()}
        services.close_task(
            self.task, TaskStatus.FAILED, reason=reason, activity_key="task.failed", actor=None
        )
        return TaskStatus.FAILED

    # -- the run ------------------------------------------------------------------------------------

    def drive(self) -> str | None:
        with Heartbeat(self.task.pk, self.token):
            return self._drive()

    def _drive(self) -> str | None:
        try:
            if self.task.attempts > MAX_ATTEMPTS:
                raise StepFailed(closing_reason("runner_lost", attempts=self.task.attempts - 1))
            self.prepare_sandbox()
            for index in range(self.task.current_step, len(self.task.workflow)):
                self.task.current_step = index
                self.run_step(index)
            return self.finish()
        except Abandoned:
            logger.info("task %s is no longer driven by runner %s", self.task.id, self.token)
            return None
        except StepFailed as failure:
            return self._fail(explained(self.task, failure.reason))
        except CocoonError as error:
            return self._fail(closing_reason_from_error(error))
        except Exception:
            logger.exception("task %s stopped with an internal error", self.task.id)
            return self._fail(closing_reason_from_error(InternalError()))

    def prepare_sandbox(self) -> None:
        task = self.task
        if task.own_sandbox and not task.sandbox_id:
            # A runner that died between creating the sandbox and saving its id left it by this name.
            sandbox = (
                Sandbox.objects.filter(name=task.id).first()
                or pools.create_sandbox(
                    actor=tenancy.acting_for(SYSTEM_ACTOR, task), name=task.id, **task.sandbox_spec
                ).sandbox
            )
            task.sandbox_id = sandbox.id
            self._save("sandbox_id")
        self._require_sandbox()
        sandboxes.exec_in_sandbox(task.sandbox_id, ["sh", "-c", PREPARE])

    def _require_sandbox(self) -> None:
        sandbox = Sandbox.objects.filter(pk=self.task.sandbox_id).first()
        if sandbox is None or sandbox.state != SandboxState.RUNNING:
            raise StepFailed(closing_reason("sandbox_gone", sandbox=self.task.sandbox_id))

    def run_step(self, index: int) -> None:
        task = self.task
        step, state = task.workflow[index], task.steps[index]
        if state["status"] == StepStatus.DONE:
            return
        agent = Agent.objects.filter(pk=state.get("agentId") or "").first()
        if agent is None:
            agent = agents.spawn_agent(
                task.sandbox_id,
                step["profile"],
                actor=SYSTEM_ACTOR,
                prompt=workflow.render_prompt(step["prompt"], task, index),
                env={
                    "COCOON_TASK_ID": task.id,
                    "COCOON_REPORT_FILE": workflow.report_path(task.id),
                    "COCOON_STEP": str(index + 1),
                },
                providers=step.get("providers") or None,
                model=step.get("model") or None,
                task_id=task.id,
                name=f"{agents.default_name(task.title, step['profile'])} ({index + 1}/{len(task.workflow)})",
            )
            state |= {
                "status": StepStatus.RUNNING,
                "agentId": agent.id,
                "startedAt": timezone.now().isoformat(),
            }
            self._save("steps", "current_step")
        deadline = datetime.fromisoformat(state["startedAt"]) + timedelta(seconds=step["timeoutS"])
        agent = self.wait(index, agent.id, deadline)
        if agent.status == AgentStatus.EXITED and agent.exit_code != 0:
            code = "?" if agent.exit_code is None else agent.exit_code
            raise StepFailed(closing_reason("step_exit", step=index + 1, code=code))
        if agent.status == AgentStatus.ERROR:  # not logged in, an API error: the step did not happen
            why, screen = agent.status_reason or "?", screen_tail(agent.last_screen, FAILED_SCREEN_LINES)
            raise StepFailed(closing_reason("step_failed", step=index + 1, why=why, screen=screen))
        if agent.status == AgentStatus.DONE:
            agents.kill_agent(agent.id, actor=SYSTEM_ACTOR)  # finished: its session is of no more use
        state |= {
            "status": StepStatus.DONE,
            "finishedAt": timezone.now().isoformat(),
            "exitCode": agent.exit_code,
        }
        self._save("steps")

    def wait(self, index: int, agent_id: str, deadline: datetime) -> Agent:
        """Wait for the step's agent to be done or exit; a blocked agent is reported and waited for."""
        state = self.task.steps[index]
        while True:
            remaining = (deadline - timezone.now()).total_seconds()
            if remaining <= 0:
                try:
                    agents.kill_agent(agent_id, actor=SYSTEM_ACTOR)
                except CocoonError:
                    logger.info("could not stop the agent %s of a timed-out step", agent_id)
                timeout = self.task.workflow[index]["timeoutS"]
                raise StepFailed(closing_reason("step_timeout", step=index + 1, timeout=timeout))
            self._save()  # heartbeat; raises Abandoned after a cancel
            self._require_sandbox()
            blocked = state["status"] == StepStatus.BLOCKED
            until: list[str] = [AgentStatus.DONE, AgentStatus.ERROR, AgentStatus.EXITED]
            until += [AgentStatus.WORKING, AgentStatus.IDLE] if blocked else [AgentStatus.BLOCKED]
            agent = poller.wait_for(agent_id, until, min(remaining, HEARTBEAT_S))
            if agent.status not in until:  # not yet: the heartbeat, then wait again
                continue
            if agent.status in {AgentStatus.DONE, AgentStatus.ERROR, AgentStatus.EXITED}:
                return agent
            if agent.status == AgentStatus.BLOCKED:
                state["status"] = StepStatus.BLOCKED
                self._save("steps")
                activity.record(
                    "task.blocked",
                    {"task": self.task.id, "step": index + 1},
                    sandbox_id=self.task.sandbox_id,
                    agent_id=agent_id,
                )
            else:
                state["status"] = StepStatus.RUNNING
                self._save("steps")

    def finish(self) -> str:
        task = self.task
        path = workflow.report_path(task.id)
        try:
            content = files.read_file(task.sandbox_id, path).content
        except NotFound:
            raise StepFailed(closing_reason("no_report", path=path)) from None
        try:
            report = json.loads(content)
        except json.JSONDecodeError as error:
            raise StepFailed(closing_reason("report_not_json", path=path, problem=str(error))) from None
        problems = [error.message for error in REPORT_VALIDATOR.iter_errors(report)]
        if problems:
            raise StepFailed(closing_reason("report_invalid", path=path, problem="; ".join(problems)[:500]))
        task.report = report
        with contextlib.suppress(git.PatchTooLarge):  # too large to keep: the sandbox still has it
            task.diff = serialize_diff(git.diff(task.sandbox_id))
        if not self._owned():
            raise Abandoned
        if report["ok"] and report.get("autoClose"):
            services.close_task(task, TaskStatus.DONE, activity_key="task.done", actor=None)
        else:
            services.close_task(task, TaskStatus.REVIEW, activity_key="task.review", actor=None)
        return task.status
