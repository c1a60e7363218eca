"""The agents' item on the setup checklist: every profile that hands out a provider's key has one."""

from typing import Any

from django.utils.translation import gettext_lazy as _

from agents.profiles import list_profiles
from cocoon.errors import interpolate_lazy
from cocoon.setup import register_check
from egress.credentials import choose


def profiles_without_provider() -> list[Any]:
    """The profiles whose CLI needs an LLM provider (their secrets name one) while none has its key."""
    return [profile for profile in list_profiles() if profile.secrets and not choose(None, profile.secrets)]


@register_check("providers", _("LLM providers for the agent profiles"))
def _providers() -> tuple[bool, Any]:
    missing = profiles_without_provider()
    if not missing:
        return True, _("Every profile that needs a provider has one with its key.")
    listed = ", ".join(f"{profile.name} ({' or '.join(profile.secrets)})" for profile in missing)
    return False, interpolate_lazy(
        _(
            "No provider has a key for: %(profiles)s. Add the key in Settings → Providers (it is kept in "
            "the vault), or set the secret it names in Settings → Secrets."
        ),
        {"profiles": listed},
    )
