"""Settings → Projects: the projects that own sandboxes (cocoon.tenancy), made and given quotas."""

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _

from ui.web import QUOTA_FIELDS, call, done, page, quotas_from, show


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
