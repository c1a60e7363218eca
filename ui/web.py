"""What every UI view shares: the browser's actor and language, calls through the method registry, and
error pages. Views call the same registry as the API, so authorization and validation are the API's."""

from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any, cast
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext_lazy as _

from cocoon.actors import Actor
from cocoon.auth import session_actor
from cocoon.errors import CocoonError, ErrorCode, Forbidden, NotFound, Unauthorized
from cocoon.i18n import language_of_request, person_language, set_person_language, supported
from cocoon.registry import registry
from ui import labels

LANGUAGE_COOKIE = "django_language"  # set by the sidebar switch (ui/static/ui/app.js); Django's name
PAGE_ERRORS = {ErrorCode.FORBIDDEN: 403, ErrorCode.NOT_FOUND: 404}


LANGUAGE_COOKIE_AGE_S = 365 * 24 * 3600


def ui_language(request: HttpRequest, own: str | None = None) -> str:
    """?lang= (which lasts: remember_language keeps it), else the switch's choice (a cookie the browser
    keeps), else the person's own (own_language), else Accept-Language, else the default."""
    return (
        supported(request.GET.get("lang"))
        or supported(request.COOKIES.get(LANGUAGE_COOKIE))
        or own
        or language_of_request(request)
    )


def own_language(request: HttpRequest, person: int | None) -> str | None:
    """A person's own language, looked up only for a browser that has chosen none (no ?lang=, no cookie):
    once it is in that browser's cookie, no page asks again."""
    if (
        person is None
        or supported(request.GET.get("lang"))
        or supported(request.COOKIES.get(LANGUAGE_COOKIE))
    ):
        return None
    return person_language(person)


def remember_language(
    request: HttpRequest, response: HttpResponse, person: int | None = None, own: str | None = None
) -> HttpResponse:
    """A choice holds for the next pages: ?lang= is kept in the switch's cookie and, when it changes what
    the browser had, with the person; their own (own_language) comes into the cookie of a browser that
    has none."""
    chosen = supported(request.GET.get("lang"))
    cookie = supported(request.COOKIES.get(LANGUAGE_COOKIE))
    if chosen and chosen != cookie and person is not None:
        set_person_language(person, chosen)
    kept = chosen or own
    if kept and kept != cookie:
        response.set_cookie(LANGUAGE_COOKIE, kept, max_age=LANGUAGE_COOKIE_AGE_S, samesite="Lax")
    return response


class ActorRequest(HttpRequest):
    """A request as page() hands it to its view, with the browser's actor on it (for the type checker:
    Django's own request object carries the attribute)."""

    actor: Actor


def actor_of(request: HttpRequest) -> Actor:
    """The browser's actor, which page() put on the request."""
    return cast(ActorRequest, request).actor


def call(request: HttpRequest, method: str, **params: Any) -> Any:
    """One method call as the browser's actor, in the page's language."""
    return registry.dispatch(method, params, actor_of(request), translation.get_language())


def profiles(request: HttpRequest) -> list[dict[str, Any]]:
    return call(request, "profile.list")


def missing_keys(request: HttpRequest, listed: list[dict[str, Any]] | None = None) -> list[str]:
    """The secrets an admin may set right where a missing provider key is reported (the spawn form, the
    checklist): the first secret each profile without a provider names."""
    if not actor_of(request).is_admin:
        return []
    missing = [profile["secrets"][0] for profile in listed or profiles(request) if profile["providerMissing"]]
    return list(dict.fromkeys(missing))


def form_number(raw: str) -> int | float | str:
    """A form's number; what is none is passed on as it is, for the schema to answer a field error."""
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def form_errors(error: CocoonError, prefix: str = "") -> dict[str, Any]:
    """The error for a form: its message, and each field's message by path (without the prefix)."""
    rendered = error.render()
    fields = {
        field["path"].removeprefix(prefix): field["message"]
        for field in rendered["details"].get("fields") or []
    }
    return {"message": rendered["message"], "fields": fields}


def method_of(actions: dict[str, Any], action: str) -> Any:
    """The method behind a URL's action word; only the listed ones, whatever the URL says."""
    if action not in actions:
        raise NotFound()
    return actions[action]


def error_page(request: HttpRequest, error: CocoonError, status: int | None = None) -> HttpResponse:
    rendered = error.render()
    status = status or error.http_status
    return render(request, "ui/error.html", {"error": rendered, "status": status}, status=status)


def wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("accept", "")


def back(request: HttpRequest, fallback: str) -> str:
    """Where an action returns to: the form's `next` if it is ours, else the fallback."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return fallback


def page(*, admin: bool = False) -> Callable:
    """A UI view: logged in (else to the login form), admin pages only for admins (else a 403 page),
    rendered in the UI language; a method error becomes an error page (GET) or a message (POST)."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            actor = session_actor(request.session)
            person = actor.user if actor is not None else None
            own = own_language(request, person)
            language = ui_language(request, own)
            with translation.override(language):
                request.LANGUAGE_CODE = language
                if actor is None:
                    if wants_json(request):
                        return JsonResponse({"error": Unauthorized().render()}, status=401)
                    query = urlencode({"next": request.get_full_path()})
                    return redirect(f"{reverse('ui:login')}?{query}")
                if admin and not actor.is_admin:
                    return error_page(request, Forbidden(_("This page needs an admin.")))
                cast(ActorRequest, request).actor = actor
                try:
                    return remember_language(request, view(request, *args, **kwargs), person, own)
                except CocoonError as error:
                    return _failed(request, error)

        return wrapper

    return decorate


def _failed(request: HttpRequest, error: CocoonError) -> HttpResponse:
    if wants_json(request):
        return JsonResponse({"error": error.render()}, status=error.http_status)
    referer = request.headers.get("referer", "")
    from_a_page = url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()})
    # An action that failed leads back to the page its form is on, with the reason: never to an error
    # page with no way back (a push to a remote the sandbox lacks is not found, and says how to set
    # one); that page shows its own 404 if what it was about is gone. A post from no page of ours to
    # what is not there (a made-up action) is a 404 page, and one the actor may not make a 403 page.
    if (
        request.method == "POST"
        and error.code != ErrorCode.FORBIDDEN
        and (from_a_page or error.code not in PAGE_ERRORS)
    ):
        messages.error(request, describe(error))
        # Back to the page the form is on: an action's own URL answers no GET.
        return redirect(back(request, referer if from_a_page else request.path))
    return error_page(request, error)


def describe(error: CocoonError) -> str:
    """The message with its field errors, for a flash message."""
    rendered = error.render()
    fields = rendered["details"].get("fields") or []
    details = "; ".join(f"{field['path']}: {field['message']}" for field in fields)
    return f"{rendered['message']} {details}".strip()


def done(request: HttpRequest, fallback: str, message: Any = None, **result: Any) -> HttpResponse:
    """The answer to a successful action: JSON for scripts (fetch), else back with a message."""
    if wants_json(request):
        return JsonResponse({"result": result, "message": str(message or "")})
    if message:
        messages.success(request, message)
    return redirect(back(request, fallback))


# The quota fields of the form, and how each is read; a blank one is no limit.
QUOTA_FIELDS: dict[str, Callable[[str], Any]] = {
    "sandboxes": int,
    "cpus": float,
    "memoryMb": int,
    "agents": int,
    "dailyCost": float,
}


def quotas_from(form: QueryDict, prefix: str = "", fields: Iterable[str] = QUOTA_FIELDS) -> dict[str, Any]:
    """The quotas a form gives; what is no number goes to the method as it is, to be refused there by
    field (invalid_params), as every form's values are."""
    quotas: dict[str, Any] = {}
    for name in fields:
        read = QUOTA_FIELDS[name]
        value = form.get(prefix + name, "").strip()
        if value:
            try:
                quotas[name] = read(value)
            except ValueError:
                quotas[name] = value
    return quotas


def secret_posted(request: HttpRequest, project: str | None = None) -> HttpResponse:
    """A secrets form's post (name, value; delete): the server's secret set or deleted, or with project
    that project's own."""
    name = request.POST.get("name", "").strip()
    scope = {"project": project} if project else {}
    prefix = "projects." if project else "secrets."
    if request.POST.get("delete"):
        call(request, prefix + ("delete_secret" if project else "delete"), name=name, **scope)
        return done(request, request.path, _("Secret %(name)s deleted.") % {"name": name})
    value = request.POST.get("value", "")
    call(request, prefix + ("set_secret" if project else "set"), name=name, value=value, **scope)
    return done(request, request.path, _("Secret %(name)s saved.") % {"name": name})


def show(
    request: HttpRequest, template: str, context: dict[str, Any] | None = None, status: int = 200
) -> HttpResponse:
    """Render a page with what the layout needs: the sidebar, blocked agents, the language switch."""
    blocked = [agent["id"] for agent in call(request, "agent.list", status=["blocked"])]
    actor = actor_of(request)
    layout = {
        "actor": actor,
        "blocked_agents": blocked,
        # A person's projects, for the sidebar's switch (an admin works in all of them at once).
        "my_projects": call(request, "projects.list")
        if actor.user is not None and not actor.is_admin
        else [],
        "js_strings": js_strings(),
    }
    return render(request, template, layout | (context or {}), status=status)


def js_strings() -> dict[str, Any]:
    """The few texts the scripts write themselves, in the page's language, and the words of live values."""
    return {
        "labels": labels.words(),
        "connected": str(_("Live")),
        "disconnected": str(_("Reconnecting…")),
        "changed": str(_("Something changed.")),
        "reload": str(_("Reload")),
        "blocked": str(_("An agent needs a decision")),
        "copied": str(_("Copied")),
        "saved": str(_("Done")),
        "terminalClosed": str(_("The terminal connection closed.")),
        "readOnly": str(_("read-only")),
    }
