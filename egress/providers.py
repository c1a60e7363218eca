"""Model providers: the built-in Anthropic and OpenAI routes plus settings.providers, the environment
an agent gets for them (SPEC §5), and providers.test."""

import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import config, vault
from cocoon.actors import Actor
from cocoon.choices import ProviderKind
from cocoon.errors import Conflict, Forbidden, field_error, interpolate_lazy
from sandboxes.choices import NetworkMode

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


@dataclass(frozen=True)
class Provider:
    """A provider as listed: its entry (BUILTIN's or settings.providers'), whether it is a built-in one
    left as it is, and whether its secret is set."""

    id: str
    entry: dict[str, Any]
    builtin: bool
    secret_set: bool


@dataclass(frozen=True)
class ProviderCheck:
    """What providers.test found: result is ok, unreachable, unauthorized or error; message is a lazy
    translation."""

    result: str
    message: Any
    status: int | None = None
    models: list[str] = field(default_factory=list)


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


def key_of(provider: dict[str, Any]) -> str:
    if provider.get("auth") == "none" or not provider.get("secret"):
        return ""
    return vault.read_secret(provider["secret"]) or ""


def env_prefix(provider_id: str, provider: dict[str, Any]) -> str:
    if provider["kind"] == ProviderKind.ANTHROPIC:
        return "ANTHROPIC"
    if provider["kind"] == ProviderKind.OPENAI:
        return "OPENAI"
    return provider.get("envPrefix") or provider_id.upper().replace("-", "_")


def key_variable(provider_id: str, provider: dict[str, Any]) -> str:
    prefix = env_prefix(provider_id, provider)
    if provider["kind"] == ProviderKind.ANTHROPIC and provider.get("secret") == OAUTH_SECRET:
        return OAUTH_SECRET
    if provider["kind"] == ProviderKind.ANTHROPIC and provider.get("auth") == "bearer":
        return "ANTHROPIC_AUTH_TOKEN"
    return f"{prefix}_API_KEY"


def reachable_base_url(url: str, host_alias: str) -> str:
    """localhost means the server: inside a container that is the engine's host alias."""
    parts = urlsplit(url)
    if (parts.hostname or "") not in LOOPBACK_NAMES:
        return url
    netloc = host_alias + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def choose(requested: list[str] | None, profile_secrets: list[str]) -> dict[str, dict[str, Any]]:
    """The providers an agent uses: those asked for (each must exist and have its secret), else the
    providers whose secret the profile hands out and which have it set."""
    known = all_providers()
    if requested:
        chosen = {}
        for index, provider_id in enumerate(requested):
            provider = known.get(provider_id)
            if provider is None:
                raise field_error(
                    f"providers.{index}",
                    interpolate_lazy(_("There is no provider %(id)s."), {"id": provider_id}),
                )
            if provider.get("auth") != "none" and not key_of(provider):
                raise field_error(
                    f"providers.{index}",
                    interpolate_lazy(
                        _("The secret %(name)s is not set."), {"name": provider.get("secret", "")}
                    ),
                )
            chosen[provider_id] = provider
        return chosen
    chosen, prefixes = {}, set()
    for provider_id, provider in known.items():
        # One provider per set of variables: the first (an API key before an OAuth token) wins.
        prefix = env_prefix(provider_id, provider)
        if provider.get("secret") in profile_secrets and prefix not in prefixes and key_of(provider):
            chosen[provider_id] = provider
            prefixes.add(prefix)
    return chosen


def credentials_env(
    sandbox: Any,
    requested: list[str] | None,
    profile: Any,
    model: str,
    host_alias: str,
    actor: Actor,
    agent_id: str = "",
) -> tuple[dict[str, str], list[str]]:
    """The variables that carry credentials to one agent, and the providers its sandbox needs grants for.
    A placeholder names the agent too (cocoon_<sandboxToken>_<SECRET>.<agentId>), so that the proxy
    meters each request to its agent.

    The credential proxy is the only way a credential reaches an agent (SPEC §5): a provider's secret
    becomes a placeholder only this sandbox can use, the base URL the proxy's route. A sandbox without
    network gets no credentials at all. Anything else goes in as itself only if an admin marked it raw,
    and only when an admin asks.
    """
    from egress.services import credential_proxy_url

    chosen = choose(requested, profile.secrets)
    if sandbox.network == NetworkMode.NONE and chosen:
        if requested:
            raise field_error(
                "providers", _("The sandbox has no network: its agents cannot use providers."), "no_network"
            )
        raise Conflict(
            _(
                "Sandbox %(sandbox)s has no network: the credential proxy cannot broker %(names)s, which "
                "profile %(profile)s hands out."
            ),
            sandbox=sandbox.id,
            names=", ".join(provider["secret"] for provider in chosen.values()),
            profile=profile.name,
        )
    document = config.get_settings()
    proxied = document["egress"]["credentialProxy"]
    env: dict[str, str] = {}
    raw: list[str] = []
    for provider_id, provider in chosen.items():
        prefix = env_prefix(provider_id, provider)
        if proxied:
            env[f"{prefix}_BASE_URL"] = f"{credential_proxy_url()}/p-{provider_id}"
            key = f"cocoon_{sandbox.proxy_token}_{provider.get('secret', 'NONE')}"
            key += f".{agent_id}" if agent_id else ""
        else:
            env[f"{prefix}_BASE_URL"] = reachable_base_url(provider["baseUrl"], host_alias)
            key = key_of(provider)
        if provider.get("auth") != "none":
            env[key_variable(provider_id, provider)] = key
            raw += [] if proxied else [provider["secret"]]
        chosen_model = model or provider.get("defaultModel", "")
        if chosen_model and provider["kind"] in {ProviderKind.ANTHROPIC, ProviderKind.OPENAI}:
            env[f"{prefix}_MODEL"] = chosen_model
    unbrokered = _unbrokered(profile.secrets, document)
    for name in [*raw, *unbrokered]:
        _check_raw(name, actor, document)
    return env | unbrokered, list(chosen) if proxied else []


def _unbrokered(profile_secrets: list[str], document: dict[str, Any]) -> dict[str, str]:
    """The profile's secrets that are set and that no provider brokers: they could only go in as
    themselves. (A secret some provider brokers goes only through that provider; when it is not
    chosen, another credential of the same kind is.)"""
    brokered = {provider.get("secret") for provider in all_providers(document).values()}
    values = {name: vault.read_secret(name) for name in profile_secrets if name not in brokered}
    return {name: value for name, value in values.items() if value is not None}


def check_profile_secrets(profile_secrets: list[str], actor: Actor) -> None:
    """Up front, what spawning a profile for this caller would need (task and schedule templates: their
    runs start later, as the server itself)."""
    document = config.get_settings()
    for name in _unbrokered(profile_secrets, document):
        _check_raw(name, actor, document)


def _check_raw(name: str, actor: Actor, document: dict[str, Any]) -> None:
    if not config.is_raw_secret(name, document):
        raise Conflict(
            _(
                "The secret %(name)s cannot reach an agent: no provider brokers it through the credential "
                "proxy, and no admin marked it raw (settings secrets.%(name)s.raw)."
            ),
            name=name,
        )
    if not actor.is_admin:
        raise Forbidden(
            _(
                "The secret %(name)s would reach the agent as itself (it is marked raw): only an admin may "
                "do that."
            ),
            name=name,
        )


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
    except httpx.HTTPError as error:
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
