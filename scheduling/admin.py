"""Read-only admin pages for tasks and schedules: changes go through the services (the web UI's pages
and the methods), never as raw row edits that would skip validation, events and clean-up."""

from django.contrib import admin

from cocoon.admin import ReadOnlyAdmin
from scheduling.models import Schedule, Task


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ("id", "title", "status", "schedule", "sandbox_id", "created_at", "finished_at")
    list_filter = ("status",)
    search_fields = ("id", "title", "prompt")
    date_hierarchy = "created_at"


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "cron",
        "timezone",
        "overlap",
        "keep_runs",
        "enabled",
        "next_run_at",
        "last_run_at",
    )
    list_filter = ("enabled", "overlap")
    search_fields = ("id", "name")
