"""What the settings pages share: a form of fields addressed by their paths in the settings document,
removing a named entry of a settings group, and text one a line."""

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from cocoon.errors import CocoonError
from ui.web import call, done, show


@dataclass(frozen=True)
class Field:
    """One settings form field, addressed by its dotted path in the settings document."""

    path: str
    label: Any
    kind: str = "text"  # text, int, number, bool, lines, or choice
    choices: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.path.replace(".", "__")

    def value_in(self, document: dict[str, Any]) -> Any:
        for part in self.path.split("."):
            document = document.get(part, {}) if isinstance(document, dict) else {}
        return "\n".join(document) if self.kind == "lines" else document

    def parse(self, form: Any) -> Any:
        raw = form.get(self.name, "")
        if self.kind == "bool":
            return raw == "on"
        if self.kind == "lines":
            return [line.strip() for line in raw.splitlines() if line.strip()]
        if self.kind in {"int", "number"}:
            try:
                return int(raw) if self.kind == "int" else float(raw)
            except ValueError:
                return raw  # the schema answers with a field error in the form's language
        return raw.strip()


def _patch(fields: list[Field], form: Any) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for field in fields:
        *parents, leaf = field.path.split(".")
        node = patch
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = field.parse(form)
    return patch


def settings_form(
    request: HttpRequest, fields: list[Field], template: str, extra: dict[str, Any]
) -> HttpResponse:
    """GET shows the fields filled from the settings; POST saves them, showing field errors in place."""
    errors: dict[str, str] = {}
    if request.method == "POST":
        try:
            call(request, "settings.update", **_patch(fields, request.POST))
            return done(request, request.path, _("Settings saved."))
        except CocoonError as error:
            rendered = error.render()
            errors = {field["path"]: field["message"] for field in rendered["details"].get("fields", [])}
            errors = errors or {"": rendered["message"]}
    document = call(request, "settings.get")
    rows = [(field, field.value_in(document), _error_of(field, errors)) for field in fields]
    return show(
        request,
        template,
        {"rows": rows, "form_error": errors.get("", "")} | extra,
        status=400 if errors else 200,
    )


def _error_of(field: Field, errors: dict[str, str]) -> str:
    """The field's error, or that of one of its items (a list field's sandbox.openAllowCidrs.2)."""
    if field.path in errors:
        return errors[field.path]
    return next((message for path, message in errors.items() if path.startswith(f"{field.path}.")), "")


def remove(request: HttpRequest, group: str, page_name: str, message: Any) -> HttpResponse:
    """Remove the named entry of a settings group (a provider, a channel): reset its path."""
    name = request.POST.get("name", "")
    call(request, "settings.reset", keys=[f"{group}.{name}"])
    return done(request, reverse(page_name), message % {"name": name})


def lines(raw: str) -> list[str]:
    return [line.strip() for line in raw.splitlines() if line.strip()]
