"""What scheduling tells the world: its activity messages, and the events a change of a task or a
schedule publishes (their payloads are the wire shapes of scheduling.schemas)."""

from django.utils.translation import gettext_lazy as _

from cocoon import activity, events
from cocoon.choices import Visibility
from scheduling.models import Schedule, Task
from scheduling.schemas import serialize_schedule, serialize_task

activity.register_messages(
    {
        "task.created": _("Task %(task)s was created: %(title)s."),
        "task.blocked": _("Task %(task)s: the agent of step %(step)s waits for a decision."),
        "task.review": _("Task %(task)s needs a review: %(summary)s"),
        "task.done": _("Task %(task)s is done."),
        "task.failed": _("Task %(task)s failed."),
        "task.cancelled": _("Task %(task)s was cancelled."),
        "task.approved": _("Task %(task)s was approved."),
        "task.rejected": _("Task %(task)s was rejected."),
        "task.retried": _("Task %(task)s was started again from step %(step)s."),
    },
    visibility=Visibility.AGENT,
)
events.register_types("task.updated", visibility=Visibility.AGENT)

activity.register_messages(
    {
        "schedule.created": _("Schedule %(name)s was created."),
        "schedule.updated": _("Schedule %(name)s was changed."),
        "schedule.deleted": _("Schedule %(name)s was deleted."),
        "schedule.run_failed": _("Schedule %(name)s could not start a run: %(error)s"),
        "schedule.caught_up": _(
            "Schedule %(name)s missed %(missed)s runs while cocoon was down; one run was started."
        ),
    },
    visibility=Visibility.AGENT,
)
events.register_types("schedule.updated", "schedule.deleted", visibility=Visibility.AGENT)


def publish_task_updated(task: Task) -> None:
    """task.updated, in English: events go to every subscriber; clients render reasons from reasonCode."""
    events.publish(
        "task.updated",
        serialize_task(task, "en", patch=False),
        sandbox_id=task.sandbox_id or None,
        owner=task.owner,
    )


def publish_schedule_updated(schedule: Schedule) -> None:
    events.publish("schedule.updated", serialize_schedule(schedule), owner=schedule.owner)


def publish_schedule_deleted(schedule: Schedule) -> None:
    events.publish("schedule.deleted", {"id": schedule.id}, owner=schedule.owner)
