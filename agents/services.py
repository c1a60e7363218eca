"""Agents: CLIs in tmux sessions (`tmux -L cocoon`) inside their sandbox, driven through exec.

Secrets reach an agent through a private env file that its start wrapper reads and deletes — never
argv, never the container's environment. Status comes from the agents' own hooks (cocoon-status
writes /opt/cocoon/status/<id>) and, where they say nothing, from the screen and the foreground process.
"""

import logging
import time
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from agents import hooks, tmux
from agents import status as rules
from agents.choices import AgentStatus, ExitReason, PromptMode, StatusRule, StatusSource
from agents.models import Agent, AgentProfile, new_agent_id
from agents.profiles import get_profile, resume_command
from agents.schemas import serialize_agent
from agents.types import Explanation, HookSeen, Screen
from cocoon import activity, config, events, system, tenancy, tokens
from cocoon.actors import Actor, Ceilings
from cocoon.choices import TokenScope, Visibility
from cocoon.errors import Conflict, InvalidParams, interpolate_lazy
from cocoon.lookup import get_or_not_found, must_exist
from egress import credentials as egress_credentials
from egress import services as egress
from sandboxes.choices import NetworkMode, SandboxState
from sandboxes.drivers import get_driver
from sandboxes.drivers.base import DriverError
from sandboxes.models import Sandbox
from sandboxes.nodes import driver_of
from sandboxes.services import get_sandbox

logger = logging.getLogger(__name__)

# The activity that says why an agent ended (a kill records its own, with who killed it).
ENDED = {
    ExitReason.EXITED: "agent.exited",
    ExitReason.SANDBOX_STOPPED: "agent.sandbox_stopped",
    ExitReason.ENGINE_RESTARTED: "agent.engine_restarted",
    ExitReason.SESSION_VANISHED: "agent.vanished",
}
# A resume happens without a caller: its credentials are what an agent token could get (through the
# credential proxy, never a raw secret).
RESUME_ACTOR = Actor(token_id="system", name="cocoon", scope=TokenScope.AGENT)
RULE_MESSAGES = {
    StatusRule.SPAWNED: _("It was just started; the poller has not looked at it yet."),
    StatusRule.KILLED: _("It was stopped through cocoon."),
    StatusRule.RESUMED: _("It was resumed after its sandbox restarted; the poller has not looked at it yet."),
    StatusRule.SANDBOX_STOPPED: _("Its sandbox was stopped through cocoon."),
    StatusRule.SESSION_ENDED: _("Its tmux session has ended."),
    StatusRule.HOOK: _("Its own hook reported this status %(age)s s ago."),
    StatusRule.ERROR_ON_SCREEN: _("Its turn ended, and the screen shows why it failed (%(detail)s)."),
    StatusRule.FOREGROUND_PROCESS: _("The command %(detail)s runs in the foreground."),
    StatusRule.SHELL_PROMPT: _("The shell waits at its prompt: no command runs in the foreground."),
    StatusRule.QUESTION: _("A known question stands still on the screen (pattern %(detail)s)."),
    StatusRule.WORKING_INDICATOR: _("The screen shows the profile's working indicator."),
    StatusRule.START_UP_GRACE: _("It started less than %(grace)s s ago: its screen is not judged yet."),
    StatusRule.SCREEN_CHANGING: _("The screen is changing."),
    StatusRule.SETTLING: _("The screen stopped changing less than %(settle)s s ago."),
    StatusRule.QUIET_AFTER_TASK: _("The screen has been still for %(quiet)s s after it worked on its input."),
    StatusRule.QUIET: _("The screen has been still for %(quiet)s s and it has had no task yet."),
}

activity.register_messages(
    {
        "agent.spawned": _("Agent %(agent)s (%(profile)s) was started in sandbox %(name)s."),
        "agent.killed": _("Agent %(agent)s was stopped."),
        "agent.exited": _("Agent %(agent)s exited with code %(code)s."),
        "agent.sandbox_stopped": _("Agent %(agent)s ended with its sandbox."),
        "agent.engine_restarted": _(
            "Agent %(agent)s ended: its sandbox restarted under it (an engine or host restart)."
        ),
        "agent.vanished": _("Agent %(agent)s ended: its session vanished without an exit code."),
        "agent.resumed": _("Agent %(agent)s was resumed after its sandbox restarted."),
        "agent.renamed": _("Agent %(old)s is called %(agent)s now."),
    },
    visibility=Visibility.AGENT,
)
events.register_types("agent.updated", visibility=Visibility.AGENT)


def _visible(actor: Actor) -> Q:
    """The agents actor may see: its sandbox's owner is an agent's owner."""
    return tenancy.visible(actor, via="sandbox__")


AGENT_NOT_FOUND = _("Agent %(id)s does not exist.")


def get_agent(agent_id: str, actor: Actor | None = None) -> Agent:
    """The agent (one actor may see, if given)."""
    agents = Agent.objects.select_related("sandbox")
    if actor is not None:
        agents = agents.filter(_visible(actor))
    return get_or_not_found(agents, agent_id, AGENT_NOT_FOUND, id=agent_id)


def check_visible(actor: Actor, agent_id: str) -> None:
    """registry.owned's check of agentId."""
    must_exist(Agent.objects.filter(_visible(actor)), agent_id, AGENT_NOT_FOUND, id=agent_id)


def spawn_agent(
    sandbox_id: str,
    profile_name: str,
    *,
    actor: Actor,
    prompt: str | None = None,
    env: dict[str, str] | None = None,
    providers: list[str] | None = None,
    model: str | None = None,
    cols: int = 120,
    rows: int = 40,
    task_id: str = "",
    budget: dict[str, Any] | None = None,
    steering: dict[str, Any] | None = None,
    name: str | None = None,
) -> Agent:
    sandbox = get_sandbox(sandbox_id).ensure_running()
    profile = get_profile(profile_name)
    project = str(sandbox.project_id)
    steering_carved: AbstractContextManager[dict[str, Any] | None] = nullcontext(None)
    if steering is not None:  # before anything is made: ceiling_exceeded for ceilings beyond its parent's
        ceilings = tenancy.narrowed(_steering_bounds(actor, sandbox, profile, providers), steering).document()
        steering_carved = tenancy.carving(actor, ceilings.get("budget"))
    # A spawn counts against its project's agents quota (its lock held until the row is written). What
    # a token with a budget ceiling spawns spends out of its budget: in a sandbox it made, that sandbox's
    # carved budget bounds the agent; elsewhere the agent's own is carved out, and a steering agent's
    # token's budget always is (each given back if the spawn fails).
    in_own = sandbox.creator == actor.token_id
    with (
        steering_carved as steering_budget,
        nullcontext(budget) if in_own else tenancy.carving(actor, budget) as budget,
        tenancy.within_quota(
            project,
            {"agents": 1},
            lambda creators: {"agents": _running_in(project, creators)},
            tenancy.person_of(sandbox.creator),  # a person's share counts the agents in their sandboxes
        ),
    ):
        if steering is not None:
            ceilings |= {"budget": steering_budget} if steering_budget else {}
            steering = {"ceilings": ceilings, "parent": tokens.steering_parent(actor)}
        # The row is written once the session exists: the poller must never see an agent whose tmux
        # session is not there yet (it would take it for exited).
        # A first prompt is the agent's first input: it has a task from the start.
        agent = Agent(
            id=new_agent_id(),
            sandbox=sandbox,
            profile=profile.name,
            name=name or default_name(prompt, profile.name),
            status=AgentStatus.WORKING if prompt else AgentStatus.UNKNOWN,
            last_input_at=timezone.now() if prompt else None,
            task_id=task_id,
            budget=budget,
            steering=steering,
        )
        command = list(profile.command)
        if prompt and profile.prompt_mode == PromptMode.ARGUMENT:
            command.append(prompt)
        agent.providers, agent.model = providers, model or ""
        extra = {"COCOON_PROMPT_STDIN": prompt} if prompt and profile.prompt_mode == PromptMode.STDIN else {}
        _start(agent, profile, command, {**(env or {}), **extra}, actor, cols, rows)
        with transaction.atomic():
            agent.save(force_insert=True)
            activity.record(
                "agent.spawned",
                {"agent": agent.id, "profile": profile.name, "name": sandbox.name},
                actor=actor,
                sandbox_id=sandbox.id,
                agent_id=agent.id,
            )
            publish(agent)
            if settings.COCOON_WATCH_AGENTS:  # its sandbox's watcher stream, now rather than at the next tick
                transaction.on_commit(lambda: current_app.send_task("agents.tasks.watch", args=(sandbox.id,)))
    if prompt and profile.prompt_mode == PromptMode.TYPED:
        send_input(agent.id, prompt, actor=actor)
    return agent


NAME_FROM_PROMPT = 48


def default_name(prompt: str | None, profile: str) -> str:
    """An agent's name when none is given: its prompt's first words (what it was asked to do), else its
    profile's name."""
    words = " ".join("".join(c if c.isprintable() else " " for c in (prompt or "")[:500]).split())
    return Truncator(words).chars(NAME_FROM_PROMPT) if words else profile


def rename_agent(agent_id: str, name: str, *, actor: Actor) -> Agent:
    """Give an agent another name (its id stays what the API knows it by)."""
    agent = get_agent(agent_id)
    old = agent.name
    if name != old:
        agent.name = name
        with transaction.atomic():
            agent.save(update_fields=["name"])
            activity.record(
                "agent.renamed",
                {"old": old, "agent": name},
                actor=actor,
                sandbox_id=agent.sandbox_id,
                agent_id=agent.id,
            )
            publish(agent)
    return agent


def _steering_bounds(
    actor: Actor, sandbox: Sandbox, profile: AgentProfile, providers: list[str] | None
) -> Ceilings:
    """The most a steering agent's token may ask for: what its spawner's may, and no wider a network than
    its sandbox's, only the providers it gets itself, no more CPUs or memory than its sandbox has."""
    own = actor.ceilings
    modes = NetworkMode.values[: NetworkMode.values.index(sandbox.network) + 1]
    return Ceilings(
        networks=tuple(mode for mode in modes if own.networks is None or mode in own.networks),
        # Within own's (the spawn checks that).
        providers=tuple(egress_credentials.choose(providers, profile.secrets, str(sandbox.project_id))),
        cpus=min(sandbox.cpus, own.cpus or sandbox.cpus),
        memory_mb=min(sandbox.memory_mb, own.memory_mb or sandbox.memory_mb),
    )


def _running_in(project: str, creators: set[str] | None) -> int:
    """The agents of a project that have not exited (in these creators' sandboxes only, if given)."""
    running = Agent.objects.filter(sandbox__project_id=project).exclude(status=AgentStatus.EXITED)
    return (running.filter(sandbox__creator__in=creators) if creators is not None else running).count()


def _start(
    agent: Agent,
    profile: AgentProfile,
    command: list[str],
    env: dict[str, str],
    actor: Actor,
    cols: int = 120,
    rows: int = 40,
) -> None:
    """Start agent's session with command: the profile's env, credentials through the proxy, env."""
    sandbox = agent.sandbox
    credentials, granted = egress_credentials.credentials_env(
        sandbox,
        agent.providers,
        profile,
        agent.model or profile.default_model,
        get_driver().host_alias,
        actor,
        agent_id=agent.id,
    )
    variables = {**profile.env, **credentials, **env, "COCOON_AGENT_ID": agent.id}
    if granted:
        egress.grant(sandbox, granted)
    token = None
    if agent.steering is not None:
        ceilings, parent = Ceilings.of(agent.steering["ceilings"]), agent.steering["parent"]
        minted = tokens.create_steering_token(agent.id, str(sandbox.project_id), ceilings, parent)
        if minted is not None:  # None: its parent's token was revoked meanwhile (a resume): so is its own
            token, plain = minted
            variables |= {"COCOON_URL": system.public_url(), "COCOON_TOKEN": plain}
    start = partial(tmux.start_session, sandbox.id, agent.id, command, variables, cols, rows)
    # The CLI's files merged as if the home had none of them (a fresh sandbox: one exec), and merged
    # again into what it has when it has some.
    paths = hooks.paths(profile)
    try:
        try:
            agent.sandbox_boot = start(hooks.merge(dict.fromkeys(paths), variables), create_only=bool(paths))
        except tmux.HomeFilesFound as home:
            agent.sandbox_boot = start(hooks.merge(home.found, variables))
    except BaseException:
        if token is not None:  # a token nothing holds: made for a start that failed
            token.delete()
        raise


def resume(agent: Agent) -> bool:
    """Start an agent whose sandbox restarted under it again with its profile's resume command (same id,
    history kept: its own CLI session when known); False when it cannot resume (the setting is off, the
    profile has no resume command, the start failed)."""
    profile = AgentProfile.objects.filter(pk=agent.profile).first()
    command = resume_command(profile, agent.cli_session_id) if profile else []
    if profile is None or not (config.get_settings()["agents"]["resumeAfterRestart"] and command):
        return False
    try:
        _start(agent, profile, command, {}, RESUME_ACTOR)
    except Exception:  # it stays exited, with its reason; the others are resumed all the same
        logger.exception("agent %s could not be resumed", agent.id)
        return False
    with transaction.atomic():
        agent.status, agent.status_source = AgentStatus.UNKNOWN, StatusSource.HEURISTIC
        agent.status_at = timezone.now()
        agent.exit_code, agent.exit_reason = None, ""
        agent.rule, agent.rule_detail, agent.screen_hash = StatusRule.RESUMED, "", ""
        agent.save()
        activity.record("agent.resumed", {"agent": agent.id}, sandbox_id=agent.sandbox_id, agent_id=agent.id)
        publish(agent)
    return True


def end(agent: Agent, reason: str, rule: str, *, final: bool = False, **fields: Any) -> bool:
    """Record that agent ended and why (its status is exited from now on), with these fields; False if
    it had ended already, and then nothing is written (its copy is of an older row). A final end is
    written all the same: its caller ended the session itself (a kill), so its reason stands even over
    that of a poll that saw the session go first."""
    fields |= {
        "status": AgentStatus.EXITED,
        "status_at": timezone.now(),
        "status_source": StatusSource.HEURISTIC,
        "exit_reason": reason,
        "rule": rule,
    }
    if not final and not save_live(agent, fields):
        return False
    if agent.steering is not None:
        tokens.end_steering(agent.id)
    for name, value in fields.items():
        setattr(agent, name, value)
    if final:
        agent.save(update_fields=list(fields))
    if reason != ExitReason.KILLED:  # kill_agent records who killed it
        activity.record(
            ENDED[ExitReason(reason)],
            {"agent": agent.id, "code": agent.exit_code},
            sandbox_id=agent.sandbox_id,
            agent_id=agent.id,
        )
    publish(agent)
    return True


def deleted(sender: Any, instance: Agent, **kwargs: Any) -> None:
    """An agent's row was deleted (with its sandbox): its steering tokens are revoked."""
    if instance.steering is not None:
        tokens.end_steering(instance.id)


def save_live(agent: Agent, fields: dict[str, Any]) -> bool:
    """Write fields to the agent's row unless it has ended meanwhile: a poll reads the rows before it
    asks the sandbox, and a kill between the two must not be undone by the poll's older view (the
    whole row it wrote once made a killed agent read back with an older screen and session_vanished)."""
    return Agent.objects.filter(pk=agent.pk).exclude(status=AgentStatus.EXITED).update(**fields) == 1


def publish(agent: Agent) -> None:
    events.publish("agent.updated", serialize_agent(agent), sandbox_id=agent.sandbox_id, agent_id=agent.id)


def live_agent(agent_id: str, actor: Actor | None = None) -> Agent:
    """The agent (one actor may see, if given), or not_found; conflict when it has exited or its sandbox
    is not running."""
    agent = get_agent(agent_id, actor)
    if agent.status == AgentStatus.EXITED:
        raise Conflict(_("Agent %(id)s has exited."), id=agent.id)
    agent.sandbox.ensure_running()
    return agent


def send_input(agent_id: str, text: str, *, actor: Actor, enter: bool = True) -> None:
    agent = live_agent(agent_id)
    tmux.run(agent.sandbox_id, [*tmux.TMUX, "send-keys", "-t", f"={agent.id}:", "-l", "--", text])
    if enter:
        tmux.run(agent.sandbox_id, [*tmux.TMUX, "send-keys", "-t", f"={agent.id}:", "Enter"])
    Agent.objects.filter(pk=agent.pk).update(last_input_at=timezone.now())


def send_keys(agent_id: str, keys: list[str], *, actor: Actor) -> None:
    unknown = [key for key in keys if key not in tmux.KEYS]
    if unknown:
        raise InvalidParams(_("Unknown keys: %(keys)s."), keys=", ".join(unknown))
    agent = live_agent(agent_id)
    tmux.run(agent.sandbox_id, [*tmux.TMUX, "send-keys", "-t", f"={agent.id}:", *keys])
    Agent.objects.filter(pk=agent.pk).update(last_input_at=timezone.now())


def read_screen(agent_id: str, scrollback: int = 0) -> Screen:
    """The agent's screen now; of an agent that is gone the last screen cocoon kept, marked last_known."""
    agent = get_agent(agent_id)
    if agent.status != AgentStatus.EXITED:
        agent.sandbox.ensure_running()
        try:
            screen, above = tmux.capture(agent.sandbox_id, agent.id, scrollback)
            return Screen(screen, last_known=False, scrollback=above if scrollback else None)
        except DriverError:  # its session is gone and the poller has not seen it yet
            pass
    kept = "\n".join(agent.last_scrollback.split("\n")[-scrollback:]) if scrollback else None
    return Screen(agent.last_screen, last_known=True, scrollback=kept, captured_at=agent.screen_at)


def keep_screen(agent: Agent) -> None:
    """Keep the agent's screen as it is now, before cocoon ends it, for agent.read afterwards."""
    try:
        screen, above = tmux.capture(agent.sandbox_id, agent.id, tmux.SCROLLBACK_LINES)
    except DriverError:  # its session is gone already: the poller's last look stays
        return
    agent.last_screen, agent.last_scrollback = screen.rstrip("\n"), above.rstrip("\n")
    agent.screen_at = timezone.now()
    agent.save(update_fields=["last_screen", "last_scrollback", "screen_at"])


def kill_agent(agent_id: str, *, actor: Actor) -> Agent:
    agent = get_agent(agent_id)
    if agent.status != AgentStatus.EXITED and agent.sandbox.state == SandboxState.RUNNING:
        keep_screen(agent)
        driver_of(agent.sandbox_id).exec(agent.sandbox_id, tmux.close_session(agent.id), timeout=30)
    with transaction.atomic():
        end(agent, ExitReason.KILLED, StatusRule.KILLED, final=True, rule_detail="")
        activity.record(
            "agent.killed", {"agent": agent.id}, actor=actor, sandbox_id=agent.sandbox_id, agent_id=agent.id
        )
    return agent


def explain_agent(agent_id: str) -> Explanation:
    """Why the agent has its status: the deciding rule and what the last poll saw, with ages; the
    summary is rendered in the language of whoever reads it."""
    agent = get_agent(agent_id)
    now = time.time()
    report = rules.parse_hook(agent.hook_report)
    last_input = agent.last_input_at.timestamp() if agent.last_input_at else None
    quiet_s = round(now - agent.last_activity_at.timestamp(), 1)
    hook = None
    if report is not None:
        counts = last_input is None or report[1] >= last_input
        hook = HookSeen(report[0], round(now - report[1], 1), counts)
    params = {
        "detail": agent.rule_detail,
        "age": hook.age_s if hook else "?",
        "grace": rules.STARTUP_GRACE_S,
        "settle": rules.SETTLE_S,
        "quiet": quiet_s,
    }
    return Explanation(
        agent=agent,
        summary=interpolate_lazy(RULE_MESSAGES[StatusRule(agent.rule)], params),
        hook=hook,
        screen_quiet_s=quiet_s,
        start_up_grace_s=round(max(0.0, rules.STARTUP_GRACE_S - (now - agent.created_at.timestamp())), 1),
    )


def list_agents(
    actor: Actor, sandbox_id: str | None = None, statuses: list[str] | None = None
) -> list[Agent]:
    """The agents actor may see, of one sandbox and in some statuses if given."""
    agents = Agent.objects.filter(_visible(actor))
    if sandbox_id:
        agents = agents.filter(sandbox_id=sandbox_id)
    if statuses:
        agents = agents.filter(status__in=statuses)
    return list(agents)
