"""JSON Schema helpers for method declarations, and validation with translated field errors."""

import re
from datetime import datetime, tzinfo
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from cocoon.errors import field, field_error, fields_error, interpolate_lazy

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
BOOLEAN: Schema = {"type": "boolean"}
INTEGER: Schema = {"type": "integer"}
TIMESTAMP: Schema = {"type": "string", "format": "date-time"}


def timestamp(value: datetime | None) -> str | None:
    """A TIMESTAMP on the wire, or None for a time that has not come (a nullable(TIMESTAMP))."""
    return value.isoformat() if value else None


EMPTY: Schema = {"type": "object", "additionalProperties": False}
# A spending limit (agent.spawn, task.create, usage.set_budget): a cost in settings usage.currency, tokens
# (input, output and cache tokens together), or both; the credential proxy refuses requests past it.
BUDGET: Schema = {
    "type": "object",
    "properties": {
        "cost": {"type": "number", "exclusiveMinimum": 0, "maximum": 1_000_000_000},
        "tokens": {"type": "integer", "minimum": 1, "maximum": 10**15},
        # refuse (default): its requests are refused; stop: also kill the agent, fail the task.
        "onSpent": {"type": "string", "enum": ["refuse", "stop"]},
    },
    "additionalProperties": False,
    "anyOf": [{"required": ["cost"]}, {"required": ["tokens"]}],
}
# Environment variables: {NAME: value}.
ENV: Schema = {
    "type": "object",
    "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
    "additionalProperties": STRING,
}
ANY_OBJECT: Schema = {"type": "object"}


def obj(properties: dict[str, Schema], required: tuple[str, ...] = (), **extra: Any) -> Schema:
    """A closed object schema: unknown fields are errors, so typos never pass silently."""
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema | extra


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items} | extra


def string(**extra: Any) -> Schema:
    return {"type": "string"} | extra


def integer(**extra: Any) -> Schema:
    return {"type": "integer"} | extra


def enum(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


NULL: Schema = {"type": "null"}


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, NULL]}


LIMIT_MESSAGES = {
    "minimum": _("Must be at least %(limit)s."),
    "maximum": _("Must be at most %(limit)s."),
    "exclusiveMinimum": _("Must be more than %(limit)s."),
    "exclusiveMaximum": _("Must be less than %(limit)s."),
    "minLength": _("Must be at least %(limit)s characters long."),
    "maxLength": _("Must be at most %(limit)s characters long."),
    "minItems": _("Must have at least %(limit)s items."),
    "maxItems": _("Must have at most %(limit)s items."),
}


def _join(path: list[Any]) -> str:
    return ".".join(str(part) for part in path)


def _field_errors(error: ValidationError) -> list[dict[str, str]]:
    """Turn one jsonschema error into field errors (lazy messages that never echo the value)."""
    path = list(error.absolute_path)
    value = error.validator_value
    kind = str(error.validator)
    if kind == "required":
        missing = [name for name in value if name not in error.instance]
        return [field(_join([*path, name]), _("This field is required."), "required") for name in missing]
    if kind == "anyOf" and error.instance is not None and NULL in value:
        # nullable(schema) given a value: what the schema says of it, field by field.
        inner = [sub for sub in error.context or () if value[sub.relative_schema_path[0]] != NULL]
        if inner:
            return [found for sub in inner for found in _field_errors(sub)]
    if kind == "anyOf" and all(set(choice) == {"required"} for choice in value):
        # Alternative parameter sets (schedule.preview: cron, or a saved scheduleId).
        names = [name for choice in value for name in choice["required"]]
        message: str | Promise = interpolate_lazy(
            _("One of these fields is required: %(names)s."), {"names": ", ".join(names)}
        )
        # Shown at the first alternative, where a form would ask for it.
        return [field(_join([*path, names[0]]), message, "required")]
    if kind == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extra = [
            key for key in error.instance if key not in known and not any(re.search(p, key) for p in patterns)
        ]
        return [field(_join([*path, key]), _("Unknown field."), "unknown_field") for key in extra]
    if kind == "type":
        types = value if isinstance(value, str) else " | ".join(value)
        message = interpolate_lazy(_("Must be of type %(type)s."), {"type": types})
    elif kind == "enum":
        choices = ", ".join(str(choice) for choice in value)
        message = interpolate_lazy(_("Must be one of: %(choices)s."), {"choices": choices})
    elif kind in LIMIT_MESSAGES:
        message = interpolate_lazy(LIMIT_MESSAGES[kind], {"limit": value})
    elif kind in {"pattern", "format"}:
        message = _("Has an invalid format.")
    else:
        message = _("Is not valid.")
    return [field(_join(path), message, kind)]


def compile_schema(schema: Schema) -> Draft202012Validator:
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def validate(validator: Draft202012Validator, instance: Any) -> None:
    """Raise invalid_params listing every field error, or return if instance matches."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        fields = [entry for error in errors for entry in _field_errors(error)]
        # One missing or unknown name is reported once, though each failing keyword lists them all.
        fields = list({(entry["path"], entry["code"]): entry for entry in fields}.values())
        raise fields_error(fields)


# Read once: the list keeps out file names such as "localtime" that ZoneInfo would also open.
known_zones = cache(available_timezones)


def zone(name: str, path: str = "timezone") -> tzinfo:
    """The timezone of an IANA name, or invalid_params naming path."""
    if name not in known_zones():
        message = interpolate_lazy(_("Unknown timezone %(name)s."), {"name": name})
        raise field_error(path, message, "unknown_timezone")
    return ZoneInfo(name)


def integral(schema: Schema, value: Any) -> Any:
    """value (valid against schema) with each number the schema calls an integer as an int: JSON
    Schema lets 3.0 pass as an integer, and Python would not slice or range with it."""
    if isinstance(value, float) and schema.get("type") == "integer":
        return int(value)
    if isinstance(value, dict):
        properties, rest = schema.get("properties", {}), schema.get("additionalProperties")
        return {
            key: integral(properties.get(key, rest if isinstance(rest, dict) else {}), item)
            for key, item in value.items()
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [integral(schema["items"], item) for item in value]
    return value
