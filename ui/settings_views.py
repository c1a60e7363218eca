"""Settings pages (admin only): general settings, providers, notifications, secrets, tokens, profiles,
egress, usage (currency, daily cap, prices)."""

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from agents.choices import PromptMode
from cocoon.choices import AttentionKind, ChannelType, NetworkMode, ProviderKind
from cocoon.errors import CocoonError
from cocoon.i18n import LANGUAGES
from cocoon.settings_schema import CHANNEL_SECRETS, PRICE_FIELDS, PROVIDER_AUTH
from egress.providers import save_provider
from ui import web
from ui.web import actor_of, call, done, form_errors, form_number, page, show


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


GENERAL_FIELDS = [
    Field("general.language", _("Default language"), "choice", tuple(LANGUAGES)),
    Field("general.activityRetentionDays", _("Keep activity (days)"), "int"),
    Field("sandbox.image", _("Sandbox image")),
    Field("sandbox.network", _("Default network"), "choice", tuple(NetworkMode.values)),
    Field("sandbox.runtime", _("Default runtime")),
    Field("sandbox.readOnlyRoot", _("Read-only root filesystem for new sandboxes"), "bool"),
    Field("sandbox.limits.cpus", _("CPUs per sandbox"), "number"),
    Field("sandbox.limits.memoryMb", _("Memory per sandbox (MB)"), "int"),
    Field("sandbox.limits.pids", _("Processes per sandbox"), "int"),
    Field("sandbox.maxLimits.cpus", _("At most CPUs"), "number"),
    Field("sandbox.maxLimits.memoryMb", _("At most memory (MB)"), "int"),
    Field("sandbox.maxLimits.pids", _("At most processes"), "int"),
    Field("git.githubUrl", _("GitHub URL")),
    Field("git.githubApiUrl", _("GitHub API URL")),
    Field("toolbox.packages", _("Toolbox npm packages (one a line)"), "lines"),
]
EGRESS_FIELDS = [
    Field("egress.credentialProxy", _("Credential proxy"), "bool"),
    Field("egress.allowlist", _("Allowed domains (one a line, *.example.com for subdomains)"), "lines"),
]


def _patch(fields: list[Field], form: Any) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for field in fields:
        *parents, leaf = field.path.split(".")
        node = patch
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = field.parse(form)
    return patch


def _settings_form(
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
    rows = [(field, field.value_in(document), errors.get(field.path, "")) for field in fields]
    return show(
        request,
        template,
        {"rows": rows, "form_error": errors.get("", "")} | extra,
        status=400 if errors else 200,
    )


@page(admin=True)
def general(request: HttpRequest) -> HttpResponse:
    return _settings_form(request, GENERAL_FIELDS, "ui/settings/general.html", {"section": "general"})


@page(admin=True)
def egress(request: HttpRequest) -> HttpResponse:
    extra = {"section": "egress", "denied": call(request, "egress.denied")}
    return _settings_form(request, EGRESS_FIELDS, "ui/settings/egress.html", extra)


@page(admin=True)
@require_POST
def egress_allow(request: HttpRequest) -> HttpResponse:
    params = {"host": request.POST.get("host", "")}
    if sandbox_id := request.POST.get("sandboxId"):
        params["sandboxId"] = sandbox_id
    call(request, "egress.allow", **params)
    return done(request, reverse("ui:egress"), _("%(host)s is allowed now.") % {"host": params["host"]})


# -- providers ---------------------------------------------------------------------------------------

PROVIDER_TEXT = ("baseUrl", "secret", "header", "envPrefix", "defaultModel")


def _provider_from(form: Any) -> dict[str, Any]:
    provider = {"kind": form.get("kind", ""), "auth": form.get("auth", "")}
    provider |= {key: form[key].strip() for key in PROVIDER_TEXT if form.get(key, "").strip()}
    provider["models"] = [
        model.strip() for model in form.get("models", "").replace(",", "\n").splitlines() if model.strip()
    ]
    return provider


@page(admin=True)
def providers(request: HttpRequest) -> HttpResponse:
    context = {
        "section": "providers",
        "providers": sorted(call(request, "settings.get")["providers"].items()),
        "secrets": [secret["name"] for secret in call(request, "secrets.list")],
        "kinds": ProviderKind.values,
        "auths": PROVIDER_AUTH,
        "edit": request.GET.get("edit", ""),
    }
    return show(request, "ui/settings/providers.html", context)


@page(admin=True)
@require_POST
def provider_save(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()
    save_provider(name, _provider_from(request.POST), actor=actor_of(request))
    return done(request, reverse("ui:providers"), _("Provider %(name)s saved.") % {"name": name})


def _remove(request: HttpRequest, group: str, page_name: str, message: Any) -> HttpResponse:
    """Remove the named entry of a settings group (a provider, a channel): reset its path."""
    name = request.POST.get("name", "")
    call(request, "settings.reset", keys=[f"{group}.{name}"])
    return done(request, reverse(page_name), message % {"name": name})


@page(admin=True)
@require_POST
def provider_delete(request: HttpRequest) -> HttpResponse:
    return _remove(request, "providers", "ui:providers", _("Provider %(name)s removed."))


@page(admin=True)
@require_POST
def provider_test(request: HttpRequest) -> HttpResponse:
    """providers.test on the form's values, saved or not."""
    result = call(request, "providers.test", provider=_provider_from(request.POST))
    return done(request, reverse("ui:providers"), result.pop("message"), **result)


# -- secrets, tokens, profiles -----------------------------------------------------------------------


@page(admin=True)
def secrets(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        if request.POST.get("delete"):
            call(request, "secrets.delete", name=name)
            return done(request, request.path, _("Secret %(name)s deleted.") % {"name": name})
        call(request, "secrets.set", name=name, value=request.POST.get("value", ""))
        return done(request, request.path, _("Secret %(name)s saved.") % {"name": name})
    listed = call(request, "secrets.list")
    raw = [secret["name"] for secret in listed if secret["raw"]]
    return show(
        request, "ui/settings/secrets.html", {"section": "secrets", "secrets": listed, "raw_secrets": raw}
    )


@page(admin=True)
def tokens(request: HttpRequest) -> HttpResponse:
    created = None
    if request.method == "POST":
        if token_id := request.POST.get("revoke"):
            call(request, "tokens.revoke", tokenId=token_id)
            return done(request, request.path, _("Token revoked."))
        # Shown in this answer only: the plain token is never stored, so it cannot be shown again.
        created = call(
            request,
            "tokens.create",
            name=request.POST.get("name", "").strip(),
            scope=request.POST.get("scope", ""),
        )
    context = {"section": "tokens", "tokens": call(request, "tokens.list"), "created": created}
    return show(request, "ui/settings/tokens.html", context)


def _lines(raw: str) -> list[str]:
    return [line.strip() for line in raw.splitlines() if line.strip()]


def _profile_from(form: Any) -> dict[str, Any]:
    """profile.create/update params from the form: argv and patterns one a line, env as KEY=value lines."""
    env = dict(line.split("=", 1) for line in _lines(form.get("env", "")) if "=" in line)
    fields = {
        "name": form.get("name", "").strip(),
        "command": _lines(form.get("command", "")),
        "promptMode": form.get("promptMode", ""),
        "env": env,
        "secrets": _lines(form.get("secrets", "").replace(",", "\n")),
        "hooks": form.get("hooks") == "on",
        "workingPattern": form.get("workingPattern", ""),
        "blockedPatterns": _lines(form.get("blockedPatterns", "")),
        "defaultModel": form.get("defaultModel", "").strip(),
        "resumeCommand": _lines(form.get("resumeCommand", "")),
        "answers": [line.split() for line in _lines(form.get("answers", ""))],
    }
    if not fields["answers"]:  # none given: the profile keeps its own (a new one gets the defaults)
        del fields["answers"]
    return {key: value for key, value in fields.items() if value != "" or key == "workingPattern"}


@page(admin=True)
def profiles(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _change_profile(request)
    listed = web.profiles(request)
    edit = request.GET.get("edit", "")
    context = {
        "section": "profiles",
        "profiles": listed,
        "edit": edit,
        "current": next((profile for profile in listed if profile["name"] == edit), {}),
        "prompt_modes": PromptMode.values,
    }
    return show(request, "ui/settings/profiles.html", context)


def _change_profile(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()
    if request.POST.get("reset"):
        call(request, "profile.reset", name=name)
        message = _("Profile %(name)s was reset to its built-in definition.")
    elif request.POST.get("delete"):
        call(request, "profile.delete", name=name)
        message = _("Profile %(name)s deleted.")
    else:
        exists = any(profile["name"] == name for profile in web.profiles(request))
        call(request, "profile.update" if exists else "profile.create", **_profile_from(request.POST))
        message = _("Profile %(name)s saved.")
    return done(request, reverse("ui:profiles"), message % {"name": name})


# -- notifications -----------------------------------------------------------------------------------

# A channel's URL and secret are write-only: an empty field keeps the stored one.


def _channel_from(form: Any) -> dict[str, Any]:
    """A settings.update channel from the form."""
    channel: dict[str, Any] = {
        "type": form.get("type", ""),
        "enabled": form.get("enabled") == "on",
        "kinds": form.getlist("kinds"),
        "sandboxes": _lines(form.get("sandboxes", "").replace(",", "\n")),
    }
    channel |= {key: form[key].strip() for key in CHANNEL_SECRETS if form.get(key, "").strip()}
    if delay := form.get("delayS", "").strip():
        channel["delayS"] = form_number(delay)
    quiet = {key: form.get(f"quiet-{key}", "").strip() for key in ("from", "to", "timezone")}
    if any(quiet.values()):
        channel["quietHours"] = quiet
    return channel


@page(admin=True)
def notifications(request: HttpRequest) -> HttpResponse:
    """The channels, a form to add or edit one (POST saves it; field errors next to the fields) and the
    last deliveries."""
    channels = call(request, "settings.get")["notifications"]["channels"]
    name = (request.POST.get("name") or request.GET.get("edit") or "").strip()
    current, errors = channels.get(name, {}), None
    if request.method == "POST":
        channel = _channel_from(request.POST)
        try:
            call(request, "settings.update", notifications={"channels": {name: channel}})
            emptied = [rule for rule in ("quietHours", "delayS") if rule in current and rule not in channel]
            if emptied:  # none any more (an update merges: what it leaves out stays)
                call(
                    request,
                    "settings.reset",
                    keys=[f"notifications.channels.{name}.{rule}" for rule in emptied],
                )
            return done(request, request.path, _("Channel %(name)s saved.") % {"name": name})
        except CocoonError as error:
            errors = form_errors(error, prefix=f"notifications.channels.{name}.")
        # Shown again as typed, but for what is write-only.
        current = current | {key: value for key, value in channel.items() if key not in CHANNEL_SECRETS}
    fields = (errors or {}).get("fields", {})
    context = {
        "section": "notifications",
        "channels": sorted(channels.items()),
        "name": name,
        "editing": name in channels,
        "current": current,
        "errors": errors,
        # By the form's field: quietHours.timezone is the quiet hours' error.
        "field_errors": {path.split(".")[0]: message for path, message in reversed(fields.items())},
        "types": ChannelType.values,
        "kinds": AttentionKind.values,
        "deliveries": call(request, "notifications.deliveries", limit=50),
    }
    return show(request, "ui/settings/notifications.html", context, status=400 if errors else 200)


@page(admin=True)
@require_POST
def notification_delete(request: HttpRequest) -> HttpResponse:
    return _remove(request, "notifications.channels", "ui:notifications", _("Channel %(name)s removed."))


@page(admin=True)
@require_POST
def notification_test(request: HttpRequest) -> HttpResponse:
    """notifications.test: send a test message to a saved channel now."""
    result = call(request, "notifications.test", channel=request.POST.get("channel", ""))
    message = (
        _("A test message went to %(channel)s.")
        if result["sent"]
        else _("The test message to %(channel)s failed: %(error)s")
    )
    return done(request, reverse("ui:notifications"), message % result, **result)


# -- usage -------------------------------------------------------------------------------------------

USAGE_FIELDS = {
    "currency": _("Currency (ISO 4217 code, e.g. USD)"),
    "dailyCap": _("Daily cap for all agents together (0: no cap)"),
    "notifyAt": _("Notify when this share of a budget is spent (e.g. 0.8)"),
}
PRICE_COLUMNS = {
    "provider": _("Provider"),
    "model": _("Model"),
    "input": _("Input"),
    "output": _("Output"),
    "cacheWrite": _("Cache write"),
    "cacheRead": _("Cache read"),
}
BLANK_PRICE_ROWS = 3  # empty rows under the table, to add prices


@dataclass
class PriceRow:
    """One row of the price table as the form shows it: its values as text, and its field errors."""

    values: dict[str, str]
    remove: bool = False
    errors: dict[str, str] = dataclass_field(default_factory=dict)

    @property
    def blank(self) -> bool:
        return not any(self.values.values())

    @property
    def sent(self) -> bool:
        """Whether the row is one of the prices saved (not removed, not left empty)."""
        return not self.remove and not self.blank

    def cells(self) -> list[tuple[str, Any, str, str]]:
        return [
            (column, label, self.values[column], self.errors.get(column, ""))
            for column, label in PRICE_COLUMNS.items()
        ]

    def entry(self) -> dict[str, Any]:
        """The settings' price entry; what is no number goes as typed, for the schema to answer."""
        numbers = {name: form_number(self.values[name]) for name in PRICE_FIELDS}
        return {"provider": self.values["provider"], "model": self.values["model"]} | numbers


def _price_rows_of(form: Any) -> list[PriceRow]:
    """The table's rows as posted (prices-<index>-<column>), with the row of "move up" moved up."""
    rows: list[PriceRow] = []
    while f"prices-{len(rows)}-model" in form:
        prefix = f"prices-{len(rows)}-"
        values = {column: form.get(prefix + column, "").strip() for column in PRICE_COLUMNS}
        rows.append(PriceRow(values, remove=form.get(prefix + "remove") == "on"))
    up = form.get("up", "")
    if up.isdigit() and 0 < int(up) < len(rows):
        index = int(up)
        rows[index - 1], rows[index] = rows[index], rows[index - 1]
    return rows


def _usage_errors(error: CocoonError, rows: list[PriceRow]) -> tuple[dict[str, Any], dict[str, str]]:
    """The error for the form, and the top fields' errors (and the table's as "prices"). A price's error
    (usage.prices.<index>.<column>, an index of the rows saved) goes to its row's cell, and the summary
    names the row as the form does: removed and empty rows were never sent."""
    saved = [index for index, row in enumerate(rows) if row.sent]
    errors = form_errors(error, prefix="usage.")
    fields: dict[str, str] = {}
    summary: dict[str, str] = {}
    for path, message in errors["fields"].items():
        name, _dot, rest = path.partition(".")
        index, _dot, column = rest.partition(".")
        if name == "prices" and index.isdigit() and int(index) < len(saved):
            row = saved[int(index)]
            rows[row].errors.setdefault(column if column in PRICE_COLUMNS else "model", message)
            path = f"prices.{row}.{column}".rstrip(".")
        elif name in USAGE_FIELDS:
            fields[name] = message
        else:
            fields.setdefault("prices", message)
        summary[path] = message
    return errors | {"fields": summary}, fields


@page(admin=True)
def prices(request: HttpRequest) -> HttpResponse:
    """Settings usage: the currency, the daily cap, when to notify, and the price table (first match
    wins, so the rows keep their order). POST saves it all or nothing; field errors next to the fields."""
    document = call(request, "settings.get")
    current = document["usage"]
    errors: dict[str, Any] | None = None
    field_errors: dict[str, str] = {}
    if request.method == "POST":
        typed = {name: request.POST.get(name, "").strip() for name in USAGE_FIELDS}
        rows = _price_rows_of(request.POST)
        usage = {
            "currency": typed["currency"],
            "dailyCap": form_number(typed["dailyCap"]),
            "notifyAt": form_number(typed["notifyAt"]),
            "prices": [row.entry() for row in rows if row.sent],
        }
        # Only what changed: prices left as they are keep following cocoon's defaults.
        patch = {name: value for name, value in usage.items() if value != current[name]}
        try:
            if patch:
                call(request, "settings.update", usage=patch)
            return done(request, request.path, _("Usage settings saved."))
        except CocoonError as error:
            errors, field_errors = _usage_errors(error, rows)
    else:
        # As text: a number the template wrote would be localized, and a German 2,5 comes back as no number.
        typed = {name: str(current[name]) for name in USAGE_FIELDS}
        rows = [
            PriceRow({column: str(entry[column]) for column in PRICE_COLUMNS}) for entry in current["prices"]
        ]
        rows += [PriceRow(dict.fromkeys(PRICE_COLUMNS, "")) for _index in range(BLANK_PRICE_ROWS)]
    context = {
        "section": "usage",
        "fields": [
            (name, label, typed[name], field_errors.get(name, "")) for name, label in USAGE_FIELDS.items()
        ],
        "rows": rows,
        "columns": PRICE_COLUMNS.values(),
        "currency": current["currency"],
        "errors": errors,
        "prices_error": field_errors.get("prices", ""),
        # What a row's provider may be: *, a kind, or a provider's id.
        "provider_choices": ["*", *ProviderKind.values, *sorted(document["providers"])],
    }
    return show(request, "ui/settings/usage.html", context, status=400 if errors else 200)


@page(admin=True)
@require_POST
def prices_reset(request: HttpRequest) -> HttpResponse:
    call(request, "settings.reset", keys=["usage.prices"])
    return done(request, reverse("ui:prices"), _("The prices are cocoon's defaults again."))
