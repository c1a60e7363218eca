"""Read-mostly admin pages for tasks and schedules (the web UI's pages come with the UI issue)."""

from django.contrib import admin
from django.http import HttpRequest

from scheduling.models import Schedule, Task


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "status", "schedule", "sandbox_id", "created_at", "finished_at")
    list_filter = ("status",)
    search_fields = ("id", "title", "prompt")
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tasks are created through task.create, which validates and starts them

    def has_change_permission(self, request: HttpRequest, obj: Task | None = None) -> bool:
        return False


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
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
    readonly_fields = ("id", "cron", "timezone", "template", "next_run_at", "last_run_at", "skipped_runs")
    fields = ("id", "name", "cron", "timezone", "template", "overlap", "keep_runs", "enabled", "next_run_at",
              "last_run_at", "skipped_runs")  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # schedule.create checks the cron, the timezone and the template
