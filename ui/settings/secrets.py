"""Settings → Secrets: set and delete the named secrets agents and providers use."""

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _

from ui.web import call, done, page, show


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
