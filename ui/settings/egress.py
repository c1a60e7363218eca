"""Settings → Egress: the credential proxy, the allowlist, and allowing a host that was denied."""

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from ui.settings.forms import Field, settings_form
from ui.web import call, done, page

EGRESS_FIELDS = [
    Field("egress.credentialProxy", _("Credential proxy"), "bool"),
    Field("egress.allowlist", _("Allowed domains (one a line, *.example.com for subdomains)"), "lines"),
]


@page(admin=True)
def egress(request: HttpRequest) -> HttpResponse:
    extra = {"section": "egress", "denied": call(request, "egress.denied")}
    return settings_form(request, EGRESS_FIELDS, "ui/settings/egress.html", extra)


@page(admin=True)
@require_POST
def egress_allow(request: HttpRequest) -> HttpResponse:
    params = {"host": request.POST.get("host", "")}
    if sandbox_id := request.POST.get("sandboxId"):
        params["sandboxId"] = sandbox_id
    call(request, "egress.allow", **params)
    return done(request, reverse("ui:egress"), _("%(host)s is allowed now.") % {"host": params["host"]})
