from django.apps import AppConfig


class SandboxesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sandboxes"

    def ready(self) -> None:
        from sandboxes import setup  # noqa: F401 - registers the checklist items
