"""Cron expressions in a timezone, evaluated by cronsim.

cronsim follows Debian cron across DST changes: a job whose hour is skipped in spring runs right after
the jump, and a fixed-hour job runs once, not twice, in the repeated hour of autumn (croniter runs it
twice). Instants are computed in the schedule's zone and stored in UTC.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError
from django.utils.translation import gettext_lazy as _

from cocoon.errors import field_error, interpolate_lazy
from cocoon.schema import zone

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True)
class Preview:
    """The next times of a cron expression (expanded: @daily is 0 0 * * *) in a timezone."""

    cron: str
    timezone: str
    times: list[datetime]


def check(expression: str, path: str = "cron") -> str:
    """The expression in its five-field form, or invalid_params saying what is wrong with it."""
    expanded = ALIASES.get(expression.strip().lower(), expression.strip())
    try:
        CronSim(expanded, datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC")))
    except CronSimError as error:
        message = interpolate_lazy(_("Not a valid cron expression: %(problem)s."), {"problem": str(error)})
        raise field_error(path, message, "invalid_cron") from None
    return expanded


def instants(expression: str, timezone_name: str, after: datetime) -> Iterator[datetime]:
    """The expression's instants strictly after `after`, in the schedule's zone."""
    return CronSim(check(expression), after.astimezone(zone(timezone_name)))


def next_after(expression: str, timezone_name: str, after: datetime) -> datetime:
    return next(instants(expression, timezone_name, after))
