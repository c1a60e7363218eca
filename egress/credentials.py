"""The credentials an agent gets (SPEC §5): which providers it uses, the environment that points it at
the credential proxy with a placeholder key, and the secrets that would reach it as themselves."""

from typing import Any

from django.utils.translation import gettext_lazy as _

from cocoon import config, tenancy, vault
from cocoon.actors import Actor
from cocoon.choices import ProviderKind
from cocoon.errors import Conflict, Forbidden, field_error, interpolate_lazy
from egress.providers import OAUTH_SECRET, all_providers, key_of, reachable_base_url
from egress.services import credential_proxy_url
from sandboxes.choices import NetworkMode


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


def choose(
    requested: list[str] | None, profile_secrets: list[str], project: str | None = None
) -> dict[str, dict[str, Any]]:
    """The providers an agent (of project's sandbox) uses: those asked for (each must exist and have its
    secret), else the providers whose secret the profile hands out and which have it set."""
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
            if provider.get("auth") != "none" and not key_of(provider, project):
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
        if provider.get("secret") in profile_secrets and prefix not in prefixes and key_of(provider, project):
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
    project = str(sandbox.project_id)
    chosen = choose(requested, profile.secrets, project)
    tenancy.within_ceilings(actor, providers=list(chosen))
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
            key = key_of(provider, project)
        if provider.get("auth") != "none":
            env[key_variable(provider_id, provider)] = key
            raw += [] if proxied else [provider["secret"]]
        chosen_model = model or provider.get("defaultModel", "")
        if chosen_model and provider["kind"] in {ProviderKind.ANTHROPIC, ProviderKind.OPENAI}:
            env[f"{prefix}_MODEL"] = chosen_model
    unbrokered = _unbrokered(profile.secrets, document, project)
    for name in [*raw, *unbrokered]:
        _check_raw(name, actor, document)
    return env | unbrokered, list(chosen) if proxied else []


def _unbrokered(profile_secrets: list[str], document: dict[str, Any], project: str | None) -> dict[str, str]:
    """The profile's secrets that are set and that no provider brokers: they could only go in as
    themselves. (A secret some provider brokers goes only through that provider; when it is not
    chosen, another credential of the same kind is.)"""
    brokered = {provider.get("secret") for provider in all_providers(document).values()}
    values = {name: vault.read_secret(name, project) for name in profile_secrets if name not in brokered}
    return {name: value for name, value in values.items() if value is not None}


def check_profile_secrets(profile_secrets: list[str], actor: Actor) -> None:
    """Up front, what spawning a profile for this caller would need (task and schedule templates: their
    runs start later, as the server itself)."""
    document = config.get_settings()
    for name in _unbrokered(profile_secrets, document, actor.project):
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
