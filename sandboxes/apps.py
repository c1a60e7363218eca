from django.apps import AppConfig


class SandboxesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sandboxes"

    def ready(self) -> None:
        from docker.errors import DockerException
        from requests.exceptions import ConnectionError as EngineUnreachable

        from cocoon.registry import registry
        from cocoon.system import register_info
        from sandboxes import setup
        from sandboxes.drivers.base import DriverError

        registry.translate(
            DockerException,
            EngineUnreachable,
            into=lambda error: DriverError(str(getattr(error, "explanation", None) or error)),
        )
        register_info(setup.engine_info)
