"""Budgets: what an agent, a task or a sandbox (their agents together) or all agents in a day (settings
usage.dailyCap) may spend, judged after each ingest. A budget nearly spent (settings usage.notifyAt) or
spent is a "usage.budget" event (attention makes it an item); a spent one makes the credential proxy
refuse its requests with a message naming it, until the budget is raised (usage.set_budget, the settings),
which lets requests through again as soon as the proxy has acknowledged the new policy. A task whose
request was refused is cut off: it fails, naming the budget (an unattended run cannot wait for a raise)."""

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import F, Sum
from django.utils.translation import gettext_lazy as _

from agents import services as agents
from agents.choices import AgentStatus
from agents.models import Agent
from cocoon import activity, config, events
from cocoon.actors import SYSTEM_ACTOR, Actor
from cocoon.choices import Visibility
from cocoon.errors import CocoonError, field_error
from cocoon.lookup import get_or_not_found
from cocoon.models import Project
from egress import services as egress
from egress.policy import Refusals
from sandboxes.models import Sandbox
from scheduling import services as tasks
from scheduling.choices import OPEN_STATUSES
from scheduling.models import Task
from scheduling.reasons import closing_reason
from usage.choices import BudgetStatus, Scope
from usage.models import BudgetState, UsageRecord

logger = logging.getLogger(__name__)
OK, WARNED, EXCEEDED = BudgetStatus.OK, BudgetStatus.WARNED, BudgetStatus.EXCEEDED
TOKENS = F("input_tokens") + F("output_tokens") + F("cache_write_tokens") + F("cache_read_tokens")

events.register_types("usage.budget", visibility=Visibility.AGENT)
activity.register_messages(
    {
        "usage.budget_warned": _(
            "The budget of %(scope)s %(subject)s is nearly spent: %(spent)s of %(limit)s."
        ),
        "usage.budget_exceeded": _(
            "The budget of %(scope)s %(subject)s is spent (%(spent)s of %(limit)s): its requests are refused."
        ),
        "usage.budget_ok": _("The budget of %(scope)s %(subject)s is no longer spent."),
        "usage.budget_set": _("The budget of %(scope)s %(subject)s was set to %(limit)s."),
    },
    visibility=Visibility.AGENT,
)


def serialize_state(state: BudgetState) -> dict[str, Any]:
    return {
        "scope": state.scope,
        "subject": state.subject,
        "state": state.state,
        "budget": state.budget,
        "spentCost": float(state.spent_cost),
        "spentTokens": state.spent_tokens,
        "sandboxId": state.sandbox_id or None,
        "agentId": state.agent_id or None,
        "taskId": state.task_id or None,
    }


def describe(budget: dict[str, Any], cost: Decimal, tokens: int) -> tuple[str, str]:
    """What was spent and the limit, in the budget's own terms."""
    currency = config.get_settings()["usage"]["currency"]
    spent, limit = [], []
    if "cost" in budget:
        spent.append(f"{cost:.2f} {currency}")
        limit.append(f"{budget['cost']:.2f} {currency}")
    if "tokens" in budget:
        spent.append(f"{tokens} tokens")
        limit.append(f"{budget['tokens']} tokens")
    return ", ".join(spent), ", ".join(limit)


def message(state: BudgetState) -> str:
    """What the proxy answers a refused request with (in English: the CLI shows it as it is)."""
    spent, limit = describe(state.budget, state.spent_cost, state.spent_tokens)
    if state.scope == Scope.DAY:
        owner = "today's cap of all agents"
    elif state.scope == Scope.PROJECT:
        owner = f"today's cap of project {state.subject.rpartition('/')[0]}"
    else:
        owner = f"the budget of {state.scope} {state.subject}"
    raise_it = "An admin can raise it (usage.set_budget, or settings usage.dailyCap)."
    return f"cocoon: {owner} is spent ({spent} of {limit}). {raise_it}"


def _judge(scope: str, subject: str, budget: dict[str, Any], records: Any, **where: str) -> bool:
    """Judge one budget against its records; True if its state changed (then said everywhere)."""
    sums = records.aggregate(cost=Sum("cost"), tokens=Sum(TOKENS))
    cost, tokens = sums["cost"] or Decimal(0), sums["tokens"] or 0
    shares = []
    if "cost" in budget:
        shares.append(cost / Decimal(str(budget["cost"])))
    if "tokens" in budget:
        shares.append(Decimal(tokens) / Decimal(budget["tokens"]))
    share = max(shares)
    notify_at = Decimal(str(config.get_settings()["usage"]["notifyAt"]))
    judged = EXCEEDED if share >= 1 else WARNED if share >= notify_at else OK
    state, _created = BudgetState.objects.get_or_create(
        scope=scope, subject=subject, defaults={"budget": budget, **where}
    )
    changed = judged != state.state
    values = {"state": judged, "budget": budget, "spent_cost": cost, "spent_tokens": tokens}
    if any(getattr(state, name) != value for name, value in values.items()):  # a quiet tick writes nothing
        for name, value in values.items():
            setattr(state, name, value)
        state.save()
    if changed:
        spent, limit = describe(budget, cost, tokens)
        params = {"scope": scope, "subject": subject, "spent": spent, "limit": limit}
        if judged == EXCEEDED and budget.get("onSpent") == "stop":
            transaction.on_commit(partial(_stop, scope, subject, spent, limit))
        activity.record(
            f"usage.budget_{judged}", params, sandbox_id=state.sandbox_id, agent_id=state.agent_id
        )
        events.publish(
            "usage.budget",
            serialize_state(state),
            sandbox_id=state.sandbox_id or None,
            agent_id=state.agent_id or None,
        )
    return changed


def _stop(scope: str, subject: str, spent: str, limit: str) -> None:
    """A spent budget that says stop: its agent is killed, its task failed (which kills its agent), the
    agents in its sandbox killed (their tasks fail, naming the budget)."""
    if scope == Scope.TASK:
        _fail_task(subject, closing_reason("budget_spent", spent=spent, limit=limit))
        return
    live = Agent.objects.exclude(status=AgentStatus.EXITED)
    chosen = live.filter(pk=subject) if scope == Scope.AGENT else live.filter(sandbox_id=subject)
    for agent_id in chosen.values_list("pk", flat=True):  # the day's cap has no onSpent
        try:
            agents.kill_agent(agent_id, actor=SYSTEM_ACTOR)
        except CocoonError as error:  # it ended meanwhile
            logger.info("the agent %s of a spent budget could not be stopped: %s", agent_id, error)


def _fail_task(task_id: str, reason: dict[str, Any]) -> None:
    try:
        tasks.fail_task(task_id, reason, actor=SYSTEM_ACTOR)
    except CocoonError as error:  # it ended meanwhile
        logger.info("the task %s of a spent budget could not be failed: %s", task_id, error)


def explain(task: Task) -> dict[str, Any] | None:
    """Why a task's step failed, if a spent budget covers the task (its own, its sandbox's, one of its
    agents', or today's cap): the reason naming it. A CLI refused by the proxy exits or ends its turn
    with an error; the runner asks this before it names the step's failure (scheduling.runner)."""
    covering = [(Scope.TASK, task.id), (Scope.SANDBOX, task.sandbox_id), (Scope.DAY, _today())]
    covering += [(Scope.PROJECT, f"{task.project_id}/{_today()}")]
    covering += [
        (Scope.AGENT, agent_id)
        for agent_id in Agent.objects.filter(task_id=task.id).values_list("pk", flat=True)
    ]
    for scope, subject in covering:
        state = BudgetState.objects.filter(scope=scope, subject=subject, state=EXCEEDED).first()
        if state is not None:
            spent, limit = describe(state.budget, state.spent_cost, state.spent_tokens)
            key = "budget_spent" if scope == Scope.TASK else f"budget_spent_{scope}"
            subject = subject.rpartition("/")[0] if scope == Scope.PROJECT else subject
            return closing_reason(key, subject=subject, spent=spent, limit=limit)
    return None


def cut_off(task_ids: set[str]) -> None:
    """Tasks whose requests the proxy refused fail, naming the spent budget."""
    for task in Task.objects.filter(pk__in=task_ids, status__in=OPEN_STATUSES):
        reason = explain(task)
        if reason is not None:  # else raised meanwhile: the next request passes
            _fail_task(task.id, reason)


def _retire(states: Any) -> None:
    """Budgets that are gone (removed, the cap set to 0, a past day): said to be no longer spent, so
    that their attention items close, then forgotten."""
    for state in states.exclude(state=OK):
        state.state = OK
        events.publish("usage.budget", serialize_state(state), sandbox_id=state.sandbox_id or None)
    states.delete()


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


def evaluate(
    agent_ids: set[str],
    task_ids: set[str],
    sandbox_ids: set[str] | frozenset[str] = frozenset(),
    *,
    day: bool = True,
    wait: bool = False,
) -> bool:
    """Judge the budgets of these agents, tasks and sandboxes (and today's cap); the policy is published when
    what the proxy refuses changed (with wait: and loaded by the proxy before it returns). Returns
    whether any state changed."""
    with transaction.atomic():
        before = refusals()
        changed = False
        for agent in Agent.objects.filter(pk__in=agent_ids).filter(budget__isnull=False):
            records = UsageRecord.objects.filter(agent_id=agent.id)
            where = {"sandbox_id": agent.sandbox_id, "agent_id": agent.id}
            changed |= _judge(Scope.AGENT, agent.id, agent.budget or {}, records, **where)
        for task in Task.objects.filter(pk__in=task_ids).filter(budget__isnull=False):
            records = UsageRecord.objects.filter(task_id=task.id)
            where = {"sandbox_id": task.sandbox_id, "task_id": task.id}
            changed |= _judge(Scope.TASK, task.id, task.budget or {}, records, **where)
        for sandbox in Sandbox.objects.filter(pk__in=sandbox_ids).filter(budget__isnull=False):
            records = UsageRecord.objects.filter(sandbox_id=sandbox.id)
            where = {"sandbox_id": sandbox.id}
            changed |= _judge(Scope.SANDBOX, sandbox.id, sandbox.budget or {}, records, **where)
        if day:
            now = datetime.now(UTC)
            today = now.replace(hour=0, minute=0, second=0, microsecond=0)
            cap = config.get_settings()["usage"]["dailyCap"]
            days = BudgetState.objects.filter(scope=Scope.DAY)
            _retire(days.exclude(subject=today.date().isoformat()) if cap else days)
            todays = UsageRecord.objects.filter(at__gte=today, at__lt=today + timedelta(days=1))
            if cap:
                changed |= _judge(Scope.DAY, today.date().isoformat(), {"cost": cap}, todays)
            changed |= _judge_projects(todays, today.date().isoformat())
        moved = refusals() != before
    if moved:  # a raised budget works once the proxy has loaded the policy
        egress.sync(wait=wait)
    return changed


def _judge_projects(todays: Any, day: str) -> bool:
    """Each project's cap of the day (quotas.dailyCost) against its records of the day; the states of
    other days and of caps taken away are retired."""
    caps = {
        project: quotas["dailyCost"]
        for project, quotas in Project.objects.values_list("id", "quotas")
        if quotas.get("dailyCost")
    }
    states = BudgetState.objects.filter(scope=Scope.PROJECT)
    _retire(states.exclude(subject__in=[f"{project}/{day}" for project in caps]))
    changed = False
    for project, cap in caps.items():
        changed |= _judge(Scope.PROJECT, f"{project}/{day}", {"cost": cap}, todays.filter(project=project))
    return changed


def refusals() -> Refusals:
    """For the egress policy: today's spent cap refuses everyone; a spent agent budget that agent, and
    in its sandbox every request that names no agent; a spent task budget every agent of the task (its
    own sandbox wholly: the agents of steps still to come); a spent sandbox budget the whole sandbox.
    Only live agents and open tasks count."""
    found = Refusals(all="", sandboxes={}, agents={}, unnamed={})
    today = _today()
    for state in BudgetState.objects.filter(state=EXCEEDED):
        text = message(state)
        if state.scope == Scope.DAY:
            found["all"] = text if state.subject == today else found["all"]
            continue
        if state.scope == Scope.SANDBOX:
            found["sandboxes"][state.subject] = text
            continue
        if state.scope == Scope.PROJECT:  # its sandboxes wholly, for the day it is of
            project, _sep, day = state.subject.rpartition("/")
            if day == today:
                for sandbox_id in Sandbox.objects.filter(project_id=project).values_list("pk", flat=True):
                    found["sandboxes"][sandbox_id] = text
            continue
        if state.scope == Scope.AGENT:
            live = Agent.objects.filter(pk=state.subject).exclude(status=AgentStatus.EXITED)
        else:
            task = Task.objects.filter(pk=state.subject, status__in=OPEN_STATUSES).first()
            if task is None:
                continue
            if task.own_sandbox and task.sandbox_id:
                found["sandboxes"][task.sandbox_id] = text
            live = Agent.objects.filter(task_id=task.id).exclude(status=AgentStatus.EXITED)
        for agent_id, sandbox_id in live.values_list("pk", "sandbox_id"):
            found["agents"][agent_id] = text
            found["unnamed"][sandbox_id] = text
    return found


def set_budget(
    *,
    actor: Actor,
    budget: dict[str, Any] | None,
    agent_id: str = "",
    task_id: str = "",
    sandbox_id: str = "",
) -> BudgetState | None:
    """Set (or with None remove) an agent's, a task's or a sandbox's budget and judge it again at once."""
    if sum(map(bool, (agent_id, task_id, sandbox_id))) != 1:
        raise field_error("agentId", _("Name an agent, a task or a sandbox."), "required")
    owner: Agent | Task | Sandbox
    if agent_id:
        owner = get_or_not_found(
            Agent.objects.all(), agent_id, _("Agent %(id)s does not exist."), id=agent_id
        )
        scope, subject = Scope.AGENT, agent_id
    elif task_id:
        owner = get_or_not_found(Task.objects.all(), task_id, _("Task %(id)s does not exist."), id=task_id)
        scope, subject = Scope.TASK, task_id
    else:
        owner = get_or_not_found(
            Sandbox.objects.claimed(), sandbox_id, _("Sandbox %(id)s does not exist."), id=sandbox_id
        )
        scope, subject = Scope.SANDBOX, sandbox_id
    with transaction.atomic():
        type(owner).objects.filter(pk=owner.pk).update(budget=budget)
        limit = describe(budget, Decimal(0), 0)[1] if budget else "-"
        activity.record("usage.budget_set", {"scope": scope, "subject": subject, "limit": limit}, actor=actor)
        if budget is None:
            _retire(BudgetState.objects.filter(scope=scope, subject=subject))
            egress.sync(wait=False)  # published on commit below, acknowledged before this returns
    evaluate({agent_id} - {""}, {task_id} - {""}, {sandbox_id} - {""}, day=False, wait=True)
    if budget is None:
        egress.sync(wait=True)
        return None
    return BudgetState.objects.get(scope=scope, subject=subject)
