from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_delete, post_save
from django.utils.module_loading import autodiscover_modules


class CocoonConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "cocoon"

    def ready(self) -> None:
        # Each app declares its RPC methods in methods.py; importing them registers them.
        autodiscover_modules("methods")
        from cocoon import auth, tokens
        from cocoon.models import ApiToken, Membership

        # In every process (cocoond, workers, manage.py): a changed user ends that user's live sessions,
        # a token changed or deleted (revoked, or by hand) is forgotten by every process's token cache.
        for signal in (post_save, post_delete):
            signal.connect(auth.recheck_user_connections, sender=settings.AUTH_USER_MODEL)
            signal.connect(tokens.token_changed, sender=ApiToken)
            signal.connect(auth.recheck_member_connections, sender=Membership)
