"""Settings → General: language, activity retention, sandboxes' defaults and limits, git, toolbox."""

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _

from cocoon.choices import NetworkMode
from cocoon.i18n import LANGUAGES
from ui.settings.forms import Field, settings_form
from ui.web import call, missing_keys, page

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
    Field("sandbox.openAllowCidrs", _("Open sandboxes may also reach (IPv4 networks, one a line)"), "lines"),
    Field("tasks.keepFailedSandboxHours", _("Keep a failed task's sandbox (hours)"), "int"),
    Field("git.githubUrl", _("GitHub URL")),
    Field("git.githubApiUrl", _("GitHub API URL")),
    Field("toolbox.packages", _("Toolbox npm packages (one a line)"), "lines"),
]


@page(admin=True)
def general(request: HttpRequest) -> HttpResponse:
    # The checklist too: the dashboard shows it only until everything is ready.
    extra = {
        "section": "general",
        "setup": call(request, "system.setup_status"),
        "missing_keys": missing_keys(request),
    }
    return settings_form(request, GENERAL_FIELDS, "ui/settings/general.html", extra)
