"""Model providers: the built-in Anthropic and OpenAI routes plus settings.providers, and providers.test.
The environment an agent gets for them is egress.credentials'."""

import ssl
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import config, vault
from cocoon.actors import Actor
from cocoon.choices import ProviderKind
from cocoon.errors import interpolate_lazy
from egress.types import Provider, ProviderCheck

# Claude Code's subscription token: a bearer for api.anthropic.com, brokered like an API key.
OAUTH_SECRET = "CLAUDE_CODE_OAUTH_TOKEN"

BUILTIN: dict[str, dict[str, Any]] = {
    "anthropic": {
        "kind": ProviderKind.ANTHROPIC,
        "baseUrl": "https://api.anthropic.com",
        "secret": "ANTHROPIC_API_KEY",
        "auth": "x-api-key",
    },
    "openai": {
        "kind": ProviderKind.OPENAI,
        "baseUrl": "https://api.openai.com/v1",
        "secret": "OPENAI_API_KEY",
        "auth": "bearer",
    },
    "anthropic-oauth": {
        "kind": ProviderKind.ANTHROPIC,
        "baseUrl": "https://api.anthropic.com",
        "secret": OAUTH_SECRET,
        "auth": "bearer",
    },
}
TEST_TIMEOUT_S = 10
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


@transaction.atomic
def save_provider(provider_id: str, provider: dict[str, Any], *, actor: Actor) -> None:
    """Replace a configured provider's whole entry (a merge would keep fields the caller left out)."""
    if provider_id in config.get_settings()["providers"]:
        config.reset_settings([f"providers.{provider_id}"], actor=actor)
    config.update_settings({"providers": {provider_id: provider}}, actor=actor)


def all_providers(document: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    document = document or config.get_settings()
    return {
        key: {"auth": "bearer", **provider} for key, provider in {**BUILTIN, **document["providers"]}.items()
    }


def list_providers() -> list[Provider]:
    configured = config.get_settings()["providers"]
    return [
        Provider(
            id=provider_id,
            entry=provider,
            builtin=provider_id in BUILTIN and provider_id not in configured,
            secret_set=bool(key_of(provider)),
        )
        for provider_id, provider in all_providers().items()
    ]


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").rstrip(".").encode("idna").decode("ascii")


def key_of(provider: dict[str, Any], project: str | None = None) -> str:
    """The provider's key: the server's, or as a project's sandbox gets it (vault.read_secret)."""
    if provider.get("auth") == "none" or not provider.get("secret"):
        return ""
    return vault.read_secret(provider["secret"], project) or ""


def reachable_base_url(url: str, host_alias: str) -> str:
    """localhost means the server: inside a container that is the engine's host alias."""
    parts = urlsplit(url)
    if (parts.hostname or "") not in LOOPBACK_NAMES:
        return url
    netloc = host_alias + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


# -- providers.test -----------------------------------------------------------------------------------


def tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    if bundle := config.get_settings()["egress"]["caBundle"]:
        context.load_verify_locations(cadata=bundle)
    return context


def auth_headers(provider: dict[str, Any], key: str) -> dict[str, str]:
    """The key in the provider's auth style: what providers.test sends, and what the credential proxy
    sends in place of a sandbox's placeholder (it gets them in the policy, egress.policy.build_all)."""
    auth = provider.get("auth", "bearer")
    if auth == "bearer":
        return {"Authorization": f"Bearer {key}"}
    if auth == "x-api-key":
        return {"x-api-key": key}
    if auth == "header":
        return {provider["header"]: provider.get("prefix", "") + key}
    return {}


def _probe(provider: dict[str, Any], key: str) -> tuple[str, dict[str, str]]:
    """The model list URL and the auth headers, as the agent CLIs would send them."""
    base = provider["baseUrl"].rstrip("/")
    headers = auth_headers(provider, key)
    if provider["kind"] == ProviderKind.ANTHROPIC:
        return f"{base}/v1/models", headers | {"anthropic-version": "2023-06-01"}
    if provider["kind"] == ProviderKind.OPENAI:
        return f"{base}/models", headers
    return base, headers


def _pinned(url: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
    """With a fixed answer in egress.hosts, dial that address, as the proxy would."""
    parts = urlsplit(url)
    address = config.get_settings()["egress"]["hosts"].get(parts.hostname or "")
    if not address:
        return url, headers
    netloc = (f"[{address}]" if ":" in address else address) + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc)), headers | {"Host": parts.netloc}


def _sni(url: str) -> dict[str, str]:
    # The certificate is checked against the name, also when the address was pinned.
    return {"sni_hostname": urlsplit(url).hostname or ""}


def check_provider(provider: dict[str, Any], key: str | None = None) -> ProviderCheck:
    """Reachability, auth and the model list, from the server. key overrides the stored secret
    (for input not saved yet)."""
    url, headers = _probe(provider, key if key is not None else key_of(provider))
    try:
        with httpx.Client(timeout=TEST_TIMEOUT_S, verify=tls_context()) as client:
            pinned_url, pinned_headers = _pinned(url, headers)
            response = client.get(pinned_url, headers=pinned_headers, extensions=_sni(url))
    except (httpx.HTTPError, httpx.InvalidURL) as error:  # InvalidURL: not an HTTPError
        message = _("%(url)s could not be reached: %(error)s")
        return ProviderCheck(
            "unreachable", interpolate_lazy(message, {"url": url, "error": type(error).__name__})
        )
    status = response.status_code
    if status in {401, 403}:
        message = _("The provider refused the key (HTTP %(status)s).")
        return ProviderCheck("unauthorized", interpolate_lazy(message, {"status": status}), status)
    if status >= 400:
        message = _("The provider answered HTTP %(status)s.")
        return ProviderCheck("error", interpolate_lazy(message, {"status": status}), status)
    try:
        models = [str(item["id"]) for item in response.json().get("data", []) if "id" in item][:500]
    except (ValueError, AttributeError, TypeError):
        models = []
    message = _("Reachable, key accepted, %(count)s models.")
    return ProviderCheck("ok", interpolate_lazy(message, {"count": len(models)}), status, models)
