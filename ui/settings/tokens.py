"""Settings → Tokens: API tokens, created (shown once) and revoked."""

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _

from ui.web import call, done, page, show


@page(admin=True)
def tokens(request: HttpRequest) -> HttpResponse:
    created = None
    if request.method == "POST":
        if token_id := request.POST.get("revoke"):
            call(request, "tokens.revoke", tokenId=token_id)
            return done(request, request.path, _("Token revoked."))
        # Shown in this answer only: the plain token is never stored, so it cannot be shown again.
        scope = request.POST.get("scope", "")
        # An agent token's project and reach; an admin token has neither.
        reach = {name: request.POST[name] for name in ("project", "sandboxes") if request.POST.get(name)}
        created = call(
            request,
            "tokens.create",
            name=request.POST.get("name", "").strip(),
            scope=scope,
            **(reach if scope == "agent" else {}),
        )
    context = {
        "section": "tokens",
        "tokens": call(request, "tokens.list"),
        "created": created,
        "projects": call(request, "projects.list"),
    }
    return show(request, "ui/settings/tokens.html", context)
