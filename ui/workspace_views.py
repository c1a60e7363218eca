"""A sandbox's workspace: its files (browse, view, edit, upload, download), its diff, and git (apply a
patch, commit, push, open a pull request)."""

import base64
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from sandboxes import github
from ui.diff import diff_context
from ui.web import call, done, method_of, page, show

# -- files ---------------------------------------------------------------------------------------------


def _parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0] or "/"


@page()
def files(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    """A folder's entries, or a file to view and edit (?file=), or a download (?download=)."""
    path = request.GET.get("path") or "/workspace"
    if download := request.GET.get("download"):
        content = call(request, "files.read", sandboxId=sandbox_id, path=download, encoding="base64")
        response = HttpResponse(base64.b64decode(content["content"]), content_type="application/octet-stream")
        response["Content-Disposition"] = content_disposition_header(True, download.rsplit("/", 1)[-1])
        return response
    context: dict[str, Any] = {"sandbox": call(request, "sandbox.get", sandboxId=sandbox_id), "path": path}
    if file := request.GET.get("file"):
        context |= {"file": file, "content": call(request, "files.read", sandboxId=sandbox_id, path=file)}
        context["path"] = _parent(file)
    entries = call(request, "files.list", sandboxId=sandbox_id, path=context["path"])["entries"]
    context["entries"] = sorted(entries, key=lambda entry: (entry["type"] != "directory", entry["name"]))
    context["parent"] = _parent(context["path"])
    return show(request, "ui/files.html", context)


@page()
@require_POST
def files_write(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    """Save an edited file, or upload one (multipart) into the folder being shown."""
    folder = request.POST.get("path") or "/workspace"
    if upload := request.FILES.get("upload"):
        path = f"{folder.rstrip('/')}/{upload.name}"
        content, encoding = base64.b64encode(upload.read()).decode(), "base64"
    else:
        path, content, encoding = request.POST["file"], request.POST.get("content", ""), "utf-8"
        content = content.replace("\r\n", "\n")  # browsers send form text with CRLF line ends
    call(request, "files.write", sandboxId=sandbox_id, path=path, content=content, encoding=encoding)
    target = reverse("ui:files", args=[sandbox_id])
    return done(request, f"{target}?file={path}", _("Saved %(path)s.") % {"path": path})


# -- diff and git ------------------------------------------------------------------------------------


@page()
def diff(request: HttpRequest, sandbox_id: str) -> HttpResponse:
    result = call(request, "sandbox.diff", sandboxId=sandbox_id)
    context = {
        "sandbox": call(request, "sandbox.get", sandboxId=sandbox_id),
        "patch": result["patch"],
        "github_url": github.base_url(),
        **diff_context(result, request.GET.get("view")),
    }
    return show(request, "ui/diff.html", context)


GIT_ACTIONS = {
    "apply_patch": ("sandbox.apply_patch", ("patch",), ("threeWay",)),
    "commit": ("git.commit", ("message",), ()),
    "push": ("git.push", ("branch",), ()),
    "set_remote": ("git.set_remote", ("url",), ()),
    "create_pr": ("git.create_pr", ("title", "body", "base", "head"), ()),
}


@page()
@require_POST
def git_action(request: HttpRequest, sandbox_id: str, action: str) -> HttpResponse:
    method, fields, flags = method_of(GIT_ACTIONS, action)
    params = {name: request.POST[name] for name in fields if request.POST.get(name)}
    params |= {flag: True for flag in flags if request.POST.get(flag)}
    result = call(request, method, sandboxId=sandbox_id, **params)
    messages = {
        "apply_patch": _("Patch applied.") if result.get("applied") else _("The patch does not apply."),
        "commit": _("Committed %(commit)s.") % {"commit": result.get("commit", "")[:12]},
        "push": _("Pushed."),
        "set_remote": _("The remote origin is %(url)s now.") % {"url": result.get("url", "")},
        "create_pr": _("Pull request %(url)s opened.") % {"url": result.get("url", "")},
    }
    return done(request, reverse("ui:diff", args=[sandbox_id]), messages.get(action), **result)
