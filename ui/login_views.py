"""Logging in (a token, or a Django user's name and password) and out."""

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth import login as django_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from cocoon.actors import Actor
from cocoon.auth import log_in_session, log_out
from cocoon.errors import CocoonError
from cocoon.throttle import guarded, refuse_password_if_locked
from ui.web import back, remember_language, ui_language


def _log_in(request: HttpRequest) -> Actor | None:
    """The actor the posted token or user name and password stand for, or None; raises rate_limited
    for too many wrong ones, token_revoked or token_expired for a token that no longer holds."""
    address = request.META.get("REMOTE_ADDR", "")
    token = request.POST.get("token", "").strip()
    username = request.POST.get("username", "").strip()
    if token:
        return guarded(address, lambda: log_in_session(request.session, token_plain=token))
    if not username:
        return None
    # The password backend counts a wrong password too, but can only say "no"; a 429 is said here.
    refuse_password_if_locked(username, address)
    user = authenticate(request, username=username, password=request.POST.get("password", ""))
    if user is None:
        return None
    django_login(request, user)  # the Django admin accepts the same session
    return log_in_session(request.session, user=user)


def login(request: HttpRequest) -> HttpResponse:
    """Log in with a token, or with a Django user's name and password."""
    with translation.override(ui_language(request)):
        error: str | Promise = ""
        status, headers = 200, {}
        if request.method == "POST":
            try:
                if _log_in(request) is not None:
                    return redirect(back(request, reverse("ui:dashboard")))
                error, status = _("That token or user name and password is not valid."), 401
            except CocoonError as refused:  # rate_limited, token_revoked, token_expired
                error, status, headers = (
                    refused.render()["message"],
                    refused.http_status,
                    refused.http_headers,
                )
        context = {
            "error": error,
            "next": request.GET.get("next") or request.POST.get("next", ""),
            "token_file": settings.ADMIN_TOKEN_FILE,  # where this server wrote it, not a guess
        }
        response = render(request, "ui/login.html", context, status=status)
        for name, value in headers.items():
            response[name] = value
        return remember_language(request, response)


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    log_out(request)
    return redirect("ui:login")
