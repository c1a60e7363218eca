"""Template tags of the UI: an API value shown as a word of the page's language, the value its tooltip."""

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ui.labels import word

register = template.Library()


@register.simple_tag
def label(field: str, value: str) -> SafeString:
    """A value of a live field (rule, statusSource, ...): app.js keeps it current with the same words."""
    return format_html('<span data-field="{}" title="{}">{}</span>', field, value, word(field, value))


@register.simple_tag
def status(value: str, field: str = "status") -> SafeString:
    """A status (or, with field="state", a state) with the class its colour goes by."""
    return format_html(
        '<span class="{0} {0}-{1}" data-field="{0}" title="{1}">{2}</span>', field, value, word(field, value)
    )


@register.simple_tag
def field_error(errors: dict[str, Any] | None, path: str) -> SafeString:
    """A form field's error (ui.web.form_errors, by its path: limits.cpus), next to the field."""
    message = (errors or {}).get("fields", {}).get(path)
    return (
        format_html('<span class="field-error" role="alert">{}</span>', message)
        if message
        else SafeString("")
    )
