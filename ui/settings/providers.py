"""Settings → Providers: the LLM providers, saved, removed and tested from one form."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from cocoon.choices import ProviderKind
from cocoon.settings_schema import PROVIDER_AUTH
from egress.providers import save_provider
from ui.settings.forms import remove
from ui.web import actor_of, call, done, page, show

PROVIDER_TEXT = ("baseUrl", "secret", "header", "envPrefix", "defaultModel")


def _provider_from(form: Any) -> dict[str, Any]:
    provider = {"kind": form.get("kind", ""), "auth": form.get("auth", "")}
    provider |= {key: form[key].strip() for key in PROVIDER_TEXT if form.get(key, "").strip()}
    provider["models"] = [
        model.strip() for model in form.get("models", "").replace(",", "\n").splitlines() if model.strip()
    ]
    return provider


@page(admin=True)
def providers(request: HttpRequest) -> HttpResponse:
    context = {
        "section": "providers",
        "providers": sorted(call(request, "settings.get")["providers"].items()),
        "secrets": [secret["name"] for secret in call(request, "secrets.list")],
        "kinds": ProviderKind.values,
        "auths": PROVIDER_AUTH,
        "edit": request.GET.get("edit", ""),
    }
    return show(request, "ui/settings/providers.html", context)


@page(admin=True)
@require_POST
def provider_save(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()
    save_provider(name, _provider_from(request.POST), actor=actor_of(request))
    return done(request, reverse("ui:providers"), _("Provider %(name)s saved.") % {"name": name})


@page(admin=True)
@require_POST
def provider_delete(request: HttpRequest) -> HttpResponse:
    return remove(request, "providers", "ui:providers", _("Provider %(name)s removed."))


@page(admin=True)
@require_POST
def provider_test(request: HttpRequest) -> HttpResponse:
    """providers.test on the form's values, saved or not."""
    result = call(request, "providers.test", provider=_provider_from(request.POST))
    return done(request, reverse("ui:providers"), result.pop("message"), **result)
