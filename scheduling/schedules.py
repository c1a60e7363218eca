"""Schedules: cron + timezone -> a task when due; overlap control, start-up catch-up (SPEC §7).

Every function that looks at the clock takes `now`, so the tick can be driven by Celery beat, by a
system cron (manage.py schedules_tick) or by a test with a clock of its own.
"""

import logging
from datetime import UTC, datetime
from itertools import chain, islice
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cocoon import activity, tenancy
from cocoon.actors import SYSTEM_ACTOR, Actor
from cocoon.errors import CocoonError, Conflict, field_error
from cocoon.lookup import get_or_not_found, must_exist
from scheduling import cron, services, workflow
from scheduling.choices import OPEN_STATUSES, Overlap
from scheduling.dispatch import STALE_AFTER_S, recover_runs
from scheduling.events import publish_schedule_deleted, publish_schedule_updated
from scheduling.models import Schedule, Task

logger = logging.getLogger(__name__)

MAX_MISSED_COUNTED = 10_000  # an outage of years is not walked minute by minute


SCHEDULE_NOT_FOUND = _("Schedule %(id)s does not exist.")


def get_schedule(schedule_id: str) -> Schedule:
    return get_or_not_found(Schedule, schedule_id, SCHEDULE_NOT_FOUND, id=schedule_id)


def check_visible(actor: Actor, schedule_id: str) -> None:
    """registry.owned's check of scheduleId (cocoon.tenancy)."""
    must_exist(
        Schedule.objects.filter(tenancy.visible(actor)), schedule_id, SCHEDULE_NOT_FOUND, id=schedule_id
    )


def list_schedules(actor: Actor) -> list[Schedule]:
    return list(Schedule.objects.filter(tenancy.visible(actor)))


def preview(
    *,
    expression: str | None = None,
    timezone_name: str | None = None,
    schedule_id: str | None = None,
    count: int = 5,
    after: datetime | None = None,
) -> cron.Preview:
    """The next `count` instants in the schedule's zone, for unsaved input or a saved schedule."""
    if schedule_id:
        schedule = get_schedule(schedule_id)
        expression, timezone_name = expression or schedule.cron, timezone_name or schedule.timezone
    if not expression:
        raise field_error("cron", _("This field is required."), "required")
    expanded, timezone_name = cron.check(expression), timezone_name or "UTC"
    start = after or timezone.now()
    if timezone.is_naive(start):
        start = start.replace(tzinfo=UTC)
    times = list(islice(cron.instants(expanded, timezone_name, start), count))
    return cron.Preview(expanded, timezone_name, times)


def _next_run(schedule: Schedule, now: datetime) -> datetime | None:
    return cron.next_after(schedule.cron, schedule.timezone, now) if schedule.enabled else None


FIELDS = {"name": "name", "cron": "cron", "timezone": "timezone", "template": "template",
          "overlap": "overlap", "keepRuns": "keep_runs", "enabled": "enabled"}  # fmt: skip


def _apply(schedule: Schedule, params: dict[str, Any]) -> None:
    """Set the given fields, checking those given: a template gone stale (a deleted profile) must not
    keep anyone from disabling or renaming its schedule."""
    for wire, field in FIELDS.items():
        if wire in params:
            setattr(schedule, field, params[wire])
    if "cron" in params:
        schedule.cron = cron.check(schedule.cron)
    if "timezone" in params:
        cron.zone(schedule.timezone)
    if "template" in params:
        schedule.template = workflow.check_template(schedule.template, "template")


def _save(schedule: Schedule, key: str, actor: Actor, *, create: bool = False) -> Schedule:
    try:
        with transaction.atomic():
            schedule.save(force_insert=create)
            activity.record(key, {"name": schedule.name}, actor=actor)
            publish_schedule_updated(schedule)
    except IntegrityError:
        raise Conflict(_("A schedule named %(name)s exists already."), name=schedule.name) from None
    return schedule


def create_schedule(params: dict[str, Any], *, actor: Actor, now: datetime | None = None) -> Schedule:
    tenancy.check_not_repeating(actor)
    schedule = Schedule(**tenancy.creation(actor))
    _apply(schedule, params)
    workflow.check_author(schedule.template, actor)
    schedule.next_run_at = _next_run(schedule, now or timezone.now())
    return _save(schedule, "schedule.created", actor, create=True)


def update_schedule(
    schedule_id: str, params: dict[str, Any], *, actor: Actor, now: datetime | None = None
) -> Schedule:
    tenancy.check_not_repeating(actor)
    schedule = get_schedule(schedule_id)
    timing = (schedule.cron, schedule.timezone, schedule.enabled)
    _apply(schedule, params)
    if "template" in params:
        workflow.check_author(schedule.template, actor)
    if (schedule.cron, schedule.timezone, schedule.enabled) != timing:
        schedule.next_run_at = _next_run(schedule, now or timezone.now())
    return _save(schedule, "schedule.updated", actor)


def delete_schedule(schedule_id: str, *, actor: Actor) -> None:
    """Delete the schedule; its runs stay as plain tasks."""
    schedule = get_schedule(schedule_id)
    with transaction.atomic():
        # Before the row goes (its id with it): the event carries its owner (sent once it is gone).
        activity.record("schedule.deleted", {"name": schedule.name}, actor=actor)
        publish_schedule_deleted(schedule)
        schedule.delete()


def _has_open_run(schedule: Schedule) -> bool:
    return Task.objects.filter(schedule=schedule, status__in=OPEN_STATUSES).exists()


def _create_run(schedule: Schedule, scheduled_for: datetime | None, actor: Actor) -> Task:
    # overlap: queue creates the run at once but leaves starting it to the end of the open one.
    start = not (schedule.overlap == Overlap.QUEUE and _has_open_run(schedule))
    return services.create_task(
        schedule.template, actor=actor, schedule=schedule, scheduled_for=scheduled_for, start=start
    )


def run_schedule(schedule_id: str, *, actor: Actor, now: datetime | None = None) -> Task:
    """Start a run now, outside the cron times; overlap: skip refuses while a run is open."""
    schedule = get_schedule(schedule_id)
    if schedule.overlap == Overlap.SKIP and _has_open_run(schedule):
        raise Conflict(
            _("Schedule %(name)s has a run open and does not overlap runs."),
            name=schedule.name,
        )
    with transaction.atomic():
        task = _create_run(schedule, now or timezone.now(), actor)
        schedule.last_run_at = now or timezone.now()
        schedule.save(update_fields=["last_run_at", "updated_at"])
        publish_schedule_updated(schedule)
    return task


def _fire(schedule_id: str, now: datetime, *, catching_up: bool) -> Task | None:
    """One due schedule: at most one run however many times were missed, then the next time."""
    with transaction.atomic():
        # Re-read inside the transaction: a tick running twice at once fires a schedule once.
        schedule = (
            Schedule.objects.select_for_update()
            .filter(pk=schedule_id, enabled=True, next_run_at__lte=now)
            .first()
        )
        if schedule is None:
            return None
        assert schedule.next_run_at is not None  # it matched next_run_at__lte
        missed, scheduled_for, next_run = 0, schedule.next_run_at, None
        for instant in chain(
            [schedule.next_run_at], cron.instants(schedule.cron, schedule.timezone, schedule.next_run_at)
        ):
            if instant > now:
                next_run = instant
                break
            missed, scheduled_for = missed + 1, instant
            if missed >= MAX_MISSED_COUNTED:
                next_run = cron.next_after(schedule.cron, schedule.timezone, now)
                break
        changed = Schedule.objects.filter(pk=schedule.pk, next_run_at=schedule.next_run_at).update(
            next_run_at=next_run, last_run_at=now
        )
        if not changed:
            return None
        schedule.next_run_at, schedule.last_run_at = next_run, now
        task = None
        if schedule.overlap == Overlap.SKIP and _has_open_run(schedule):
            schedule.skipped_runs += 1
            Schedule.objects.filter(pk=schedule.pk).update(skipped_runs=schedule.skipped_runs)
        else:
            try:
                with transaction.atomic():
                    task = _create_run(schedule, scheduled_for, SYSTEM_ACTOR)
            except CocoonError as error:
                # The template went stale (a profile, provider or sandbox is gone): say so, try next time.
                rendered = error.render()
                problems = [
                    f"{field['path']}: {field['message']}" for field in rendered["details"].get("fields", [])
                ]
                text = " ".join([rendered["message"], *problems])
                activity.record(
                    "schedule.run_failed", {"name": schedule.name, "schedule": schedule.id, "error": text}
                )
        if catching_up:
            activity.record("schedule.caught_up", {"name": schedule.name, "missed": missed})
        publish_schedule_updated(schedule)
    return task


def _fire_due(now: datetime | None, *, catching_up: bool) -> list[Task]:
    now = now or timezone.now()
    created = []
    for schedule_id in Schedule.objects.filter(enabled=True, next_run_at__lte=now).values_list(
        "id", flat=True
    ):
        try:
            if task := _fire(schedule_id, now, catching_up=catching_up):
                created.append(task)
        except Exception:
            logger.exception("schedule %s could not be fired", schedule_id)  # the others still are
    return created


def tick(now: datetime | None = None) -> list[Task]:
    """Fire every due schedule once; returns the runs created. Only due schedules are read (an index)."""
    return _fire_due(now, catching_up=False)


def catch_up(now: datetime | None = None) -> list[Task]:
    """At start-up: one run for each schedule that fell due while cocoon was down, however often."""
    return _fire_due(now, catching_up=True)


def start_up(now: datetime | None = None) -> None:
    """cocoond's start: catch up on missed runs once, and resume the runs the last cocoond was driving.

    With the embedded worker every running task lost its runner when cocoond stopped, so they are
    taken over at once; external workers may still be driving theirs, so those wait for a stale heartbeat.
    """
    catch_up(now)
    recover_runs(0 if settings.CELERY_EMBEDDED else STALE_AFTER_S)
