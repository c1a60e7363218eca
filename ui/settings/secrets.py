"""Settings → Secrets: set and delete the named secrets agents and providers use."""

from django.http import HttpRequest, HttpResponse

from ui.web import call, page, secret_posted, show


@page(admin=True)
def secrets(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return secret_posted(request)
    listed = call(request, "secrets.list")
    raw = [secret["name"] for secret in listed if secret["raw"]]
    return show(
        request, "ui/settings/secrets.html", {"section": "secrets", "secrets": listed, "raw_secrets": raw}
    )
