from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "scheduling"

    def ready(self) -> None:
        from cocoon.registry import registry
        from scheduling import schedules, services

        registry.owned("taskId", services.check_visible)
        registry.owned("scheduleId", schedules.check_visible)
