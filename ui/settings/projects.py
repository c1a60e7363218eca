"""Settings → Projects: the projects that own sandboxes (cocoon.tenancy), made and given quotas."""

from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.utils.translation import gettext_lazy as _

from ui.web import call, done, page, show

# The quota fields of the form, and how each is read; a blank one is no limit.
QUOTA_FIELDS = {"sandboxes": int, "cpus": float, "memoryMb": int, "agents": int, "dailyCost": float}


def quotas_from(form: QueryDict, prefix: str = "") -> dict[str, Any]:
    """The quotas a form gives; what is no number goes to the method as it is, to be refused there by
    field (invalid_params), as every form's values are."""
    quotas: dict[str, Any] = {}
    for name, read in QUOTA_FIELDS.items():
        value = form.get(prefix + name, "").strip()
        if value:
            try:
                quotas[name] = read(value)
            except ValueError:
                quotas[name] = value
    return quotas


@page(admin=True)
def projects(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        if project := request.POST.get("update"):
            call(
                request,
                "projects.update",
                id=project,
                quotas=quotas_from(request.POST, f"{project}-"),
                serverSecrets=bool(request.POST.get(f"{project}-serverSecrets")),
            )
            return done(request, request.path, _("Project %(id)s saved.") % {"id": project})
        project = request.POST.get("id", "").strip()
        name = request.POST.get("name", "").strip() or project
        call(
            request,
            "projects.create",
            id=project,
            name=name,
            quotas=quotas_from(request.POST),
            serverSecrets=bool(request.POST.get("serverSecrets")),
        )
        return done(request, request.path, _("Project %(id)s created.") % {"id": project})
    context = {"section": "projects", "projects": call(request, "projects.list"), "fields": QUOTA_FIELDS}
    return show(request, "ui/settings/projects.html", context)
