"""Settings → Profiles: the agent profiles, created, edited, deleted or reset to their built-in one."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from agents.choices import PromptMode
from ui import web
from ui.settings.forms import lines
from ui.web import call, done, page, show


def _profile_from(form: Any) -> dict[str, Any]:
    """profile.create/update params from the form: argv and patterns one a line, env as KEY=value lines."""
    env = dict(line.split("=", 1) for line in lines(form.get("env", "")) if "=" in line)
    fields = {
        "name": form.get("name", "").strip(),
        "command": lines(form.get("command", "")),
        "promptMode": form.get("promptMode", ""),
        "env": env,
        "secrets": lines(form.get("secrets", "").replace(",", "\n")),
        "hooks": form.get("hooks") == "on",
        "workingPattern": form.get("workingPattern", ""),
        "blockedPatterns": lines(form.get("blockedPatterns", "")),
        "defaultModel": form.get("defaultModel", "").strip(),
        "resumeCommand": lines(form.get("resumeCommand", "")),
        "answers": [line.split() for line in lines(form.get("answers", ""))],
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
