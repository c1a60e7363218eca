"""A person's projects: which one their session works in (the sidebar's switch), and a project's members,
own secrets and own tokens."""

from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from cocoon.auth import SESSION_PROJECT_KEY
from cocoon.choices import Role
from ui.web import (
    QUOTA_FIELDS,
    actor_of,
    back,
    call,
    done,
    form_number,
    page,
    quotas_from,
    secret_posted,
    show,
)

# A person's share of the project's quotas (a day's spend is the project's alone).
SHARE_FIELDS = [name for name in QUOTA_FIELDS if name != "dailyCost"]


@require_POST
@page()
def switch_project(request: HttpRequest) -> HttpResponseRedirect:
    """Work in another of one's projects; a project one is no member of changes nothing."""
    project = request.POST.get("project", "")
    if project in {each["id"] for each in call(request, "projects.list")}:
        request.session[SESSION_PROJECT_KEY] = project
    return redirect(back(request, "/"))


@page()
def members(request: HttpRequest, project: str) -> HttpResponse:
    created: dict[str, Any] | None = None
    created_token: dict[str, Any] | None = None
    if request.method == "POST" and "invite" in request.POST:
        created = call(request, "projects.invite", project=project, role=request.POST.get("invite", ""))
    elif request.method == "POST" and "tokenName" in request.POST:
        reach = {"sandboxes": "own"} if request.POST.get("ownSandboxes") else {}
        days = {"expiresInDays": form_number(raw)} if (raw := request.POST.get("expiresInDays", "")) else {}
        name = request.POST["tokenName"].strip()
        created_token = call(request, "projects.create_token", project=project, name=name, **reach, **days)
    elif request.method == "POST" and "revokeToken" in request.POST:
        call(request, "projects.revoke_token", project=project, tokenId=request.POST["revokeToken"])
        return done(request, request.path, _("Token revoked."))
    elif request.method == "POST" and "revokeInvite" in request.POST:
        call(request, "projects.revoke_invite", project=project, inviteId=request.POST["revokeInvite"])
        return done(request, request.path, _("The invitation was revoked."))
    elif request.method == "POST" and "user" not in request.POST:  # the secrets' forms
        return secret_posted(request, project)
    elif request.method == "POST":
        user = request.POST.get("user", "").strip()
        if request.POST.get("remove"):
            call(request, "projects.remove_member", project=project, user=user)
            return done(request, request.path, _("%(user)s was taken out.") % {"user": user})
        role = request.POST.get("role", "")
        share = quotas_from(request.POST, fields=SHARE_FIELDS)
        call(request, "projects.set_member", project=project, user=user, role=role, quotas=share)
        return done(request, request.path, _("%(user)s saved.") % {"user": user})
    actor = actor_of(request)
    manages = actor.is_admin or actor.role == Role.OWNER
    context = {
        "project": project,
        "members": call(request, "projects.members", project=project),
        "roles": Role.values,
        "share_fields": SHARE_FIELDS,
        "manages": manages,
        "secrets": call(request, "projects.secrets", project=project) if manages else [],
        "invites": call(request, "projects.invites", project=project) if manages else [],
        "created_invite": created,  # its link is shown this once
        "tokens": call(request, "projects.tokens", project=project) if manages else [],
        "created_token": created_token,  # the plain token is shown this once
    }
    return show(request, "ui/members.html", context)
