"""Notification channels' URLs and secrets: write-only, kept in the vault (NOTIFY_<NAME>_URL/_SECRET),
never in the settings document, which holds a masked preview instead."""

from typing import Any
from urllib.parse import urlsplit

import apprise
from django.utils.translation import gettext_lazy as _

from cocoon import vault
from cocoon.actors import Actor
from cocoon.choices import ChannelType
from cocoon.errors import field, fields_error
from cocoon.settings_checks import dialable


def channel_secret_name(channel: str, part: str) -> str:
    """The vault's name for a channel's URL or secret (part "url" or "secret")."""
    return f"NOTIFY_{channel.upper().replace('-', '_')}_{part.upper()}"


def url_preview(channel_type: str, url: str) -> str | None:
    """The URL as shown to readers (passwords and tokens masked), or None if it cannot be used."""
    if channel_type == ChannelType.WEBHOOK:
        if not url.startswith(("http://", "https://")) or not dialable(url):
            return None
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{'/…' if parts.path.strip('/') else ''}"
    plugin = apprise.Apprise.instantiate(url)
    if plugin is None:
        return None
    # Apprise masks passwords and tokens; a path (an ntfy topic) or a query (a JSON channel's headers)
    # may be the secret too: shown as "…".
    parts = urlsplit(str(plugin.url(privacy=True)))
    return f"{parts.scheme}://{parts.netloc}{'/…' if parts.path.strip('/') else ''}"


def take_channel_secrets(patch: dict[str, Any], stored: dict[str, Any]) -> dict[str, str]:
    """Move channels' URLs and secrets out of a patch (into the vault, by the caller): their vault
    names and values. What readers see instead is urlPreview and secretSet, which only cocoon sets.
    stored: the channels saved so far."""
    channels = patch.get("notifications", {}).get("channels", {})
    secrets: dict[str, str] = {}
    fields = []
    for name, channel in channels.items():
        before = stored.get(name, {})
        channel_type = channel.get("type") or before.get("type", ChannelType.APPRISE)
        if before and channel_type != before["type"] and "url" not in channel:  # its URL was never checked
            message = _("A channel of another type needs its URL again.")
            fields.append(field(f"notifications.channels.{name}.url", message, "required"))
        if "url" in channel:
            url = channel.pop("url")
            preview = url_preview(channel_type, url)
            if preview is None:
                message = (
                    _("Is not an http(s) URL of a host.")
                    if channel_type == ChannelType.WEBHOOK
                    else _("Is not a notification URL Apprise knows (e.g. ntfy://, mailto://, slack://).")
                )
                fields.append(field(f"notifications.channels.{name}.url", message, "invalid_url"))
                continue
            channel["urlPreview"] = preview
            secrets[channel_secret_name(name, "url")] = url
        if "secret" in channel:
            secrets[channel_secret_name(name, "secret")] = channel.pop("secret")
            channel["secretSet"] = True
    if fields:
        raise fields_error(fields)
    return secrets


def forget_channel_secrets(before: dict[str, Any], after: dict[str, Any], actor: Actor) -> None:
    """A channel that is gone takes its URL and secret out of the vault."""
    for name in before["notifications"]["channels"].keys() - after["notifications"]["channels"].keys():
        for part in ("url", "secret"):
            vault.delete_secret(channel_secret_name(name, part), actor=actor, missing_ok=True)


def save_channel_secrets(secrets: dict[str, str], actor: Actor) -> None:
    """Into the vault; in the caller's transaction, so they are rolled back if the document is refused."""
    for name, value in secrets.items():
        vault.set_secret(name, value, actor=actor)
