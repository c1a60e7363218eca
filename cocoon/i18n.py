"""Request language: x-cocoon-lang header or ?lang= -> Accept-Language -> settings.general.language."""

from django.conf import settings
from django.utils.translation import get_supported_language_variant
from django.utils.translation.trans_real import parse_accept_lang_header

LANGUAGES = [code for code, _name in settings.LANGUAGES]


def supported(code: str | None) -> str | None:
    """The supported language for a code like "de-DE", or None."""
    if not code:
        return None
    try:
        return get_supported_language_variant(code.strip().lower())
    except LookupError:
        return None


def from_accept_language(header: str | None) -> str | None:
    for code, _quality in parse_accept_lang_header(header or ""):
        if code != "*" and (language := supported(code)):
            return language
    return None


def resolve_language(explicit: str | None, accept_language: str | None) -> str:
    """Pick the language for a request; the stored default costs a query only when needed."""
    if language := supported(explicit) or from_accept_language(accept_language):
        return language
    from cocoon.config import get_settings

    return supported(get_settings()["general"]["language"]) or settings.LANGUAGE_CODE


def language_of_request(request) -> str:  # noqa: ANN001 - a Django or DRF request
    explicit = request.headers.get("x-cocoon-lang") or request.GET.get("lang")
    return resolve_language(explicit, request.headers.get("accept-language"))


def language_of_scope(headers: dict[str, str], query: dict[str, list[str]]) -> str:
    """The same for an ASGI scope (WebSockets, /mcp), from its decoded headers and query."""
    explicit = headers.get("x-cocoon-lang") or next(iter(query.get("lang", ())), None)
    return resolve_language(explicit, headers.get("accept-language"))


def person_language(user_id: int) -> str | None:
    """The language a person chose for themselves (the UI's switch), if any."""
    from cocoon.models import Preference

    return supported(Preference.objects.filter(user_id=user_id).values_list("language", flat=True).first())


def set_person_language(user_id: int, language: str) -> None:
    from cocoon.models import Preference

    Preference.objects.update_or_create(user_id=user_id, defaults={"language": language})
