from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class CocoonConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "cocoon"

    def ready(self) -> None:
        # Each app declares its RPC methods in methods.py; importing them registers them.
        autodiscover_modules("methods")
