"""The settings service: one validated settings document, defaults in code, overrides in the database.

Named config to keep it apart from Django's settings module.
"""

import copy
from pathlib import Path
from typing import Any

import yaml
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from cocoon import activity, events
from cocoon.actors import Actor
from cocoon.channel_secrets import forget_channel_secrets, save_channel_secrets, take_channel_secrets
from cocoon.choices import Visibility
from cocoon.errors import field, fields_error
from cocoon.models import SettingsDocument
from cocoon.settings_checks import validate_document, validate_patch
from cocoon.settings_defaults import DEFAULTS
from cocoon.settings_schema import CHANNEL


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """base with patch merged in: objects merge key by key, anything else is replaced."""
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def leaf_paths(patch: dict[str, Any], prefix: str = "") -> list[str]:
    paths = []
    for key, value in patch.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            paths.extend(leaf_paths(value, f"{path}."))
        else:
            paths.append(path)
    return paths


def _row() -> SettingsDocument:
    return SettingsDocument.objects.get_or_create(pk=1)[0]


def get_settings() -> dict[str, Any]:
    row = SettingsDocument.objects.filter(pk=1).first()
    return deep_merge(DEFAULTS, row.overrides if row else {})


events.register_types("settings.updated", visibility=Visibility.ADMIN)


def _save(overrides: dict[str, Any], key: str, paths: list[str], actor: Actor) -> dict[str, Any]:
    document = deep_merge(DEFAULTS, overrides)
    validate_document(document)
    forget_channel_secrets(get_settings(), document, actor)
    row = _row()
    row.overrides = overrides
    row.save()
    activity.record(key, {"keys": ", ".join(paths)}, actor=actor)
    events.publish("settings.updated", document)
    return document


@transaction.atomic
def update_settings(patch: dict[str, Any], *, actor: Actor) -> dict[str, Any]:
    """Deep-merge a partial document into the settings; returns the whole validated document."""
    validate_patch(patch)
    patch = copy.deepcopy(patch)
    secrets = take_channel_secrets(patch, get_settings()["notifications"]["channels"])
    save_channel_secrets(secrets, actor)
    return _save(
        deep_merge(_row().overrides, patch), "settings.updated", leaf_paths(patch) + sorted(secrets), actor
    )


def _remove_path(overrides: dict[str, Any], parts: list[str]) -> None:
    node: Any = overrides  # walked down an untyped JSON document
    for part in parts[:-1]:
        node = node.get(part)
        if not isinstance(node, dict):
            return
    node.pop(parts[-1], None)


def _is_known_path(parts: list[str]) -> bool:
    if parts[0] in {"providers", "secrets"}:
        return len(parts) <= 2
    if parts[:2] == ["notifications", "channels"]:  # a channel, or one of its rules (its quietHours)
        rules = CHANNEL["properties"].keys() - {"type", "urlPreview", "secretSet"}
        return len(parts) <= 3 or (len(parts) == 4 and parts[3] in rules)
    node: Any = DEFAULTS
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@transaction.atomic
def reset_settings(keys: list[str] | None, *, actor: Actor) -> dict[str, Any]:
    """Reset dotted paths (or everything) to their defaults; returns the whole document."""
    if not keys:
        return _save({}, "settings.reset", ["*"], actor)
    unknown = [
        field(f"keys.{index}", _("Unknown setting."), "unknown_setting")
        for index, key in enumerate(keys)
        if not _is_known_path(key.split("."))
    ]
    if unknown:
        raise fields_error(unknown)
    overrides = copy.deepcopy(_row().overrides)
    for key in keys:
        _remove_path(overrides, key.split("."))
    return _save(overrides, "settings.reset", keys, actor)


def is_raw_secret(name: str, document: dict[str, Any] | None = None) -> bool:
    """Whether an admin marked the secret raw (settings secrets.<name>.raw): where no provider can
    broker it through the credential proxy, it is handed to agents as itself."""
    document = document or get_settings()
    return bool(document["secrets"].get(name, {}).get("raw"))


def load_config_file(path: Path) -> dict[str, Any]:
    """Read COCOON_CONFIG (YAML or JSON; JSON is YAML)."""
    try:
        content = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ValueError(f"COCOON_CONFIG {path}: {error}") from error
    if not isinstance(content, dict):
        raise ValueError(f"COCOON_CONFIG {path}: must hold a settings object")
    return content
