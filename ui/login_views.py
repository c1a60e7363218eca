"""Logging in (a token, a Django user's name and password, or single sign-on) and out.

Single sign-on is OpenID Connect by Authlib: the provider's discovery document, the code flow with PKCE
(S256), the ID token's signature (the provider's JWKS), issuer, audience and nonce; the provider's logout
at ours. Who the checked claims are, and what their groups grant, is cocoon.sso's.
"""

import functools
from typing import Any

import requests
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.django_client import OAuth
from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth import login as django_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST
from joserfc.errors import JoseError

from cocoon import sso
from cocoon.actors import Actor
from cocoon.auth import log_in_session, log_out
from cocoon.errors import CocoonError, Forbidden, Unauthorized, Unavailable
from cocoon.throttle import guarded, refuse_password_if_locked
from ui.web import back, remember_language, ui_language


def _log_in(request: HttpRequest) -> Actor | None:
    """The actor the posted token or user name and password stand for, or None; raises rate_limited
    for too many wrong ones, token_revoked or token_expired for a token that no longer holds, forbidden
    for a password where password login is off."""
    address = request.META.get("REMOTE_ADDR", "")
    token = request.POST.get("token", "").strip()
    username = request.POST.get("username", "").strip()
    if token:
        return guarded(address, lambda: log_in_session(request.session, token_plain=token))
    if not username:
        return None
    if not settings.COCOON_PASSWORD_LOGIN:
        raise Forbidden(_("Password login is off on this server: sign on, or log in with a token."))
    # The password backend counts a wrong password too, but can only say "no"; a 429 is said here.
    refuse_password_if_locked(username, address)
    user = authenticate(request, username=username, password=request.POST.get("password", ""))
    if user is None:
        return None
    django_login(request, user)  # the Django admin accepts the same session
    return log_in_session(request.session, user=user)


def login(request: HttpRequest) -> HttpResponse:
    """Log in with a token, or with a Django user's name and password."""
    if request.method != "POST":
        return login_page(request)
    try:
        if _log_in(request) is not None:
            return redirect(back(request, reverse("ui:dashboard")))
    except CocoonError as refused:  # rate_limited, token_revoked, token_expired, forbidden
        return login_page(request, refused)
    return login_page(request, Unauthorized(_("That token or user name and password is not valid.")))


def login_page(request: HttpRequest, refused: CocoonError | None = None) -> HttpResponse:
    """The login page, saying why the last try was refused (in its HTTP status too)."""
    with translation.override(ui_language(request)):
        context = {
            "error": refused.render()["message"] if refused else "",
            "next": request.GET.get("next") or request.POST.get("next", ""),
            "token_file": settings.ADMIN_TOKEN_FILE,  # where this server wrote it, not a guess
            "password_login": settings.COCOON_PASSWORD_LOGIN,
            "sso_name": settings.COCOON_OIDC_NAME if sso.enabled() else "",
        }
        response = render(request, "ui/login.html", context, status=refused.http_status if refused else 200)
        for name, value in (refused.http_headers if refused else {}).items():
            response[name] = value
        return remember_language(request, response)


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    """End the session (and, after single sign-on, the provider's too where it offers that)."""
    id_token = request.session.get(ID_TOKEN_KEY, "")
    log_out(request)
    return (id_token and _provider_logout(request, id_token)) or redirect("ui:login")


# -- single sign-on ---------------------------------------------------------------------------------

ID_TOKEN_KEY = "cocoon.sso_id_token"  # the provider's logout wants it as id_token_hint
NEXT_KEY = "cocoon.sso_next"
# What a failed exchange with the provider raises: its refusal, a token that does not check, no answer.
FAILED = (AuthlibBaseError, JoseError, requests.RequestException, ValueError)


@functools.cache
def provider() -> Any:
    oauth = OAuth()
    return oauth.register(
        "provider",
        client_id=settings.COCOON_OIDC_CLIENT_ID,
        client_secret=settings.COCOON_OIDC_CLIENT_SECRET or None,
        server_metadata_url=f"{settings.COCOON_OIDC_ISSUER}/.well-known/openid-configuration",
        client_kwargs={"scope": settings.COCOON_OIDC_SCOPES, "code_challenge_method": "S256", "timeout": 10},
    )


def _url(request: HttpRequest, name: str) -> str:
    """An absolute address of ours the provider sends the browser back to (COCOON_URL's behind a proxy)."""
    path = reverse(name)
    return f"{settings.COCOON_URL}{path}" if settings.COCOON_URL else request.build_absolute_uri(path)


def sso_start(request: HttpRequest) -> HttpResponse:
    """Off to the provider's login; it sends the browser back to callback."""
    if not sso.enabled():
        raise Http404
    request.session[NEXT_KEY] = back(request, reverse("ui:dashboard"))
    try:
        response: HttpResponse = provider().authorize_redirect(request, _url(request, "ui:sso_callback"))
    except FAILED as failed:
        unavailable = Unavailable(_("The sign-on provider does not answer: %(reason)s"), reason=str(failed))
        return login_page(request, unavailable)
    return response


def sso_callback(request: HttpRequest) -> HttpResponse:
    """The provider's answer: a code, exchanged for an ID token that must check, whose person logs in;
    a refusal is said on the login page."""
    if not sso.enabled():
        raise Http404
    try:
        claims, id_token = _claims(request)
        user = sso.sign_on(claims)
    except CocoonError as refused:
        return login_page(request, refused)
    next_url = request.session.pop(NEXT_KEY, "") or reverse("ui:dashboard")
    django_login(request, user, backend=settings.AUTHENTICATION_BACKENDS[0])
    log_in_session(request.session, user=user)
    request.session[ID_TOKEN_KEY] = id_token
    return redirect(next_url)


def _claims(request: HttpRequest) -> tuple[dict[str, Any], str]:
    """The checked claims of the provider's ID token for the code it sent, and the token itself."""
    try:
        token = provider().authorize_access_token(
            request, claims_options={"iss": {"essential": True, "value": settings.COCOON_OIDC_ISSUER}}
        )
    except FAILED as failed:
        raise Unauthorized(_("Single sign-on failed: %(reason)s"), reason=str(failed)) from None
    if not token.get("userinfo"):
        raise Unauthorized(_("Single sign-on failed: %(reason)s"), reason="no ID token")
    return dict(token["userinfo"]), token["id_token"]


def _provider_logout(request: HttpRequest, id_token: str) -> HttpResponse | None:
    """The provider's logout (RP-initiated), back to our login page, if it has one; else None."""
    try:
        if not provider().load_server_metadata().get("end_session_endpoint"):
            return None
        response: HttpResponse = provider().logout_redirect(
            request, post_logout_redirect_uri=_url(request, "ui:login"), id_token_hint=id_token
        )
    except FAILED:
        return None  # ours is ended either way
    return response
