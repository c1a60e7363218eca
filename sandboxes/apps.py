from django.apps import AppConfig


class SandboxesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sandboxes"

    def ready(self) -> None:
        from cocoon.registry import registry
        from cocoon.system import register_info
        from sandboxes import pools, setup
        from sandboxes.drivers import as_driver_error, engine_errors

        registry.translate(*engine_errors(), into=as_driver_error)
        register_info(setup.engine_info)
        register_info(pools.info)
