from django.apps import AppConfig


class AttentionConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "attention"

    def ready(self) -> None:
        from attention import (
            feed,  # noqa: F401 - its observers hear agents, tasks and schedules
            notify,
            tasks,
        )

        notify.register_deliver(tasks.deliver)
