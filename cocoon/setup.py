"""First-run setup and the setup checklist (system.setup_status).

Services add checklist items with register_check(); the UI shows the list until every item is ok.
"""

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import activity, locks
from cocoon.actors import SYSTEM_ACTOR
from cocoon.channel_secrets import save_channel_secrets, take_channel_secrets
from cocoon.choices import TokenScope
from cocoon.config import deep_merge, load_config_file
from cocoon.datadir import write_private_file
from cocoon.models import ApiToken, SettingsDocument
from cocoon.settings_checks import validate_document, validate_patch
from cocoon.settings_defaults import DEFAULTS
from cocoon.tokens import create_token
from cocoon.types import CheckResult, SetupCheck

logger = logging.getLogger(__name__)

CHECKS: list[SetupCheck] = []


def register_check(
    key: str, title: Any, fix: str | None = None, fixable: Callable[[], bool] | None = None
) -> Callable:
    def decorator(check: Callable[[], tuple[bool, Any]]) -> Callable[[], tuple[bool, Any]]:
        CHECKS.append(SetupCheck(key, title, check, fix, fixable))
        return check

    return decorator


@register_check("adminToken", _("Admin token"))
def _admin_token() -> tuple[bool, Any]:
    if settings.COCOON_TOKEN or ApiToken.objects.live().filter(scope=TokenScope.ADMIN).exists():
        return True, _("An admin token exists.")
    return False, _("No admin token: run `python manage.py create_token --scope admin`.")


def run_checks() -> list[CheckResult]:
    return [_run(item) for item in CHECKS]


def _run(item: SetupCheck) -> CheckResult:
    ok, detail = item.check()
    fixes = not ok and item.fix and (item.fixable is None or item.fixable())
    return CheckResult(item, ok, detail, item.fix if fixes else None)


@contextmanager
def startup_lock() -> Iterator[None]:
    """Held while one process migrates and sets up: cocoond processes sharing a database start at once
    (compose, two units), and two migrates racing on PostgreSQL left one dead on "relation ... already
    exists"."""
    with locks.exclusive("startup"):
        yield


def is_first_run() -> bool:
    return not SettingsDocument.objects.exists()


def first_run(config_path: Path | None = None) -> bool:
    """Set up a new installation once: settings (from COCOON_CONFIG), admin token.

    All or nothing: an invalid COCOON_CONFIG leaves no token, no settings row and no token file.
    Returns whether this was the first run.
    """
    if not is_first_run():
        return False
    initial = load_config_file(config_path) if config_path else {}
    with transaction.atomic():
        validate_patch(initial)
        secrets = take_channel_secrets(initial, {})  # channel URLs go to the vault here too
        save_channel_secrets(secrets, SYSTEM_ACTOR)
        document = deep_merge(DEFAULTS, initial)
        validate_document(document)
        SettingsDocument.objects.create(pk=1, overrides=initial)
        _token, plain = create_token("admin", TokenScope.ADMIN, actor=SYSTEM_ACTOR, bootstrap=True)
        activity.record("system.first_run", actor=SYSTEM_ACTOR)
        write_private_file(settings.ADMIN_TOKEN_FILE, plain + "\n")
    logger.info("first start: admin token written to %s", settings.ADMIN_TOKEN_FILE)
    return True
