"""The agents' item on the setup checklist: every profile that hands out a provider's key has one."""

from typing import Any

from django.utils.translation import gettext_lazy as _

from agents.profiles import list_profiles
from cocoon.errors import interpolate_lazy
from cocoon.setup import register_check
from egress.credentials import choose


def lacks_provider(profile: Any) -> bool:
    """Its CLI needs an LLM provider (its secrets name one) and none has its key."""
    return bool(profile.secrets) and not choose(None, profile.secrets)


def profiles_without_provider() -> list[Any]:
    return [profile for profile in list_profiles() if lacks_provider(profile)]


def spawn_warnings(profile: Any, env: dict[str, str] | None, providers: list[str] | None) -> list[Any]:
    """What a spawn of this profile should know before its agent finds out: no provider key to log in
    with (unless the call names providers, which are checked, or hands a key in its env)."""
    if providers or set(profile.secrets) & set(env or {}) or not lacks_provider(profile):
        return []
    return [
        interpolate_lazy(
            _(
                "No provider has a key for profile %(profile)s (%(secrets)s): its agent cannot log in. Add "
                "the key in Settings → Providers."
            ),
            {"profile": profile.name, "secrets": " or ".join(profile.secrets)},
        )
    ]


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
