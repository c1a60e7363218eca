"""JSON Schema helpers for method declarations, and validation with translated field errors."""

import re
from typing import Any

from django.utils.translation import gettext as _
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from cocoon.errors import ErrorCode, RpcError

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
BOOLEAN: Schema = {"type": "boolean"}
INTEGER: Schema = {"type": "integer"}
TIMESTAMP: Schema = {"type": "string", "format": "date-time"}
EMPTY: Schema = {"type": "object", "additionalProperties": False}
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


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def _join(path: list[Any]) -> str:
    return ".".join(str(part) for part in path)


def _field_errors(error: ValidationError) -> list[dict[str, str]]:
    """Turn one jsonschema error into field errors whose messages never echo the offending value."""
    path = list(error.absolute_path)
    value = error.validator_value
    kind = str(error.validator)
    if kind == "required":
        missing = [name for name in value if name not in error.instance]
        return [
            {"path": _join([*path, name]), "code": "required", "message": _("This field is required.")}
            for name in missing
        ]
    if kind == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extra = [
            key for key in error.instance if key not in known and not any(re.search(p, key) for p in patterns)
        ]
        return [
            {"path": _join([*path, key]), "code": "unknown_field", "message": _("Unknown field.")}
            for key in extra
        ]
    messages = {
        "type": lambda: (
            _("Must be of type %(type)s.") % {"type": value if isinstance(value, str) else " | ".join(value)}
        ),
        "enum": lambda: (
            _("Must be one of: %(choices)s.") % {"choices": ", ".join(str(choice) for choice in value)}
        ),
        "minimum": lambda: _("Must be at least %(limit)s.") % {"limit": value},
        "maximum": lambda: _("Must be at most %(limit)s.") % {"limit": value},
        "minLength": lambda: _("Must be at least %(limit)s characters long.") % {"limit": value},
        "maxLength": lambda: _("Must be at most %(limit)s characters long.") % {"limit": value},
        "minItems": lambda: _("Must have at least %(limit)s items.") % {"limit": value},
        "maxItems": lambda: _("Must have at most %(limit)s items.") % {"limit": value},
        "pattern": lambda: _("Has an invalid format."),
        "format": lambda: _("Has an invalid format."),
    }
    message = messages.get(kind, lambda: _("Is not valid."))()
    return [{"path": _join(path), "code": kind, "message": message}]


def compile_schema(schema: Schema) -> Draft202012Validator:
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def validate(validator: Draft202012Validator, instance: Any) -> None:
    """Raise invalid_params listing every field error, or return if instance matches."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        fields = [field for error in errors for field in _field_errors(error)]
        raise RpcError(ErrorCode.INVALID_PARAMS, details={"fields": fields})
