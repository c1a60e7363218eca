from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "scheduling"

    def ready(self) -> None:
        from cocoon.registry import registry
        from scheduling import schedules, services

        registry.owned("taskId", lambda actor, task_id: services.get_task(task_id, actor))
        registry.owned("scheduleId", lambda actor, schedule_id: schedules.get_schedule(schedule_id, actor))
