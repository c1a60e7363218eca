from django.apps import AppConfig


class SandboxesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sandboxes"

    def ready(self) -> None:
        from docker.errors import DockerException
        from requests.exceptions import ConnectionError as EngineUnreachable

        from cocoon.registry import registry
        from sandboxes import setup  # noqa: F401 - registers the checklist items
        from sandboxes.drivers.base import DriverError

        registry.translate(
            DockerException,
            EngineUnreachable,
            into=lambda error: DriverError(str(getattr(error, "explanation", None) or error)),
        )
