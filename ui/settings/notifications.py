"""Settings → Notifications: the channels (saved with field errors in place, removed, tested) and the
last deliveries."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from cocoon.choices import AttentionKind, ChannelType
from cocoon.errors import CocoonError
from cocoon.settings_schema import CHANNEL_SECRETS
from ui.settings.forms import lines, remove
from ui.web import call, done, form_errors, form_number, page, show

# A channel's URL and secret are write-only: an empty field keeps the stored one.


def _channel_from(form: Any) -> dict[str, Any]:
    """A settings.update channel from the form."""
    channel: dict[str, Any] = {
        "type": form.get("type", ""),
        "enabled": form.get("enabled") == "on",
        "kinds": form.getlist("kinds"),
        "sandboxes": lines(form.get("sandboxes", "").replace(",", "\n")),
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
    return remove(request, "notifications.channels", "ui:notifications", _("Channel %(name)s removed."))


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
