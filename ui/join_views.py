"""The page an invitation's link opens (cocoon.invites): a person logged in joins with one click; anyone
else logs in first, or signs up there where password login is on. The link is the only credential."""

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth import login as django_login
from django.contrib.auth.forms import UserCreationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache

from cocoon import invites
from cocoon.auth import SESSION_PROJECT_KEY, log_in_session, session_actor
from cocoon.errors import CocoonError
from ui.web import error_page, ui_language


@never_cache
def join(request: HttpRequest, token: str) -> HttpResponse:
    with translation.override(ui_language(request)):
        try:
            invite = invites.invite_of(token)
        except CocoonError as error:
            return error_page(request, error)
        actor = session_actor(request.session)
        person = actor.user if actor is not None else None  # a person's session, not a token's
        form: UserCreationForm[Any] = UserCreationForm(
            request.POST if request.method == "POST" and person is None else None
        )
        signed_up = person is None and settings.COCOON_PASSWORD_LOGIN and form.is_valid()
        if request.method == "POST" and (person is not None or signed_up):
            user = get_user_model().objects.get(pk=person) if person is not None else form.save()
            try:
                invites.accept(token, user)
            except CocoonError as error:
                return error_page(request, error)
            if person is None:
                django_login(request, user, backend=settings.AUTHENTICATION_BACKENDS[0])
                log_in_session(request.session, user=user)
            request.session[SESSION_PROJECT_KEY] = invite.project_id  # work in it from now on
            return redirect(reverse("ui:dashboard"))
        context: dict[str, Any] = {
            "invite": invite,
            "person": actor.name if actor is not None and person is not None else "",
            "form": form,
            "sign_up": settings.COCOON_PASSWORD_LOGIN,
            "login": f"{reverse('ui:login')}?next={request.path}",
            "title": _("Join project %(name)s") % {"name": invite.project.name},
        }
        return render(request, "ui/join.html", context)
