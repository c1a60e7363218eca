"""Nothing bypasses the services (issue #14, 2): the Django admin shows agent profiles but cannot edit
them, so no screen pattern that does not compile can be stored past profile.*'s check."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents.models import AgentProfile
from agents.profiles import ensure_profiles

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client():
    ensure_profiles()
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x" * 20))
    return client


def test_the_admin_cannot_store_a_profile_pattern_that_does_not_compile(admin_client):
    profile = AgentProfile.objects.get(name="shell")
    url = f"/admin/agents/agentprofile/{profile.pk}/change/"
    answer = admin_client.post(url, {"name": "shell", "blocked_patterns": '["(unclosed"]'})
    assert answer.status_code == 403
    assert admin_client.get("/admin/agents/agentprofile/add/").status_code == 403
    profile.refresh_from_db()
    assert "(unclosed" not in profile.blocked_patterns
    assert admin_client.get(url).status_code == 200  # still shown


def test_a_built_in_profile_is_reset_through_the_service_from_the_admin(admin_client):
    profile = AgentProfile.objects.get(name="shell")
    AgentProfile.objects.filter(pk=profile.pk).update(command=["changed"])
    answer = admin_client.post(
        "/admin/agents/agentprofile/", {"action": "reset", "_selected_action": [profile.pk]}
    )
    assert answer.status_code == 302
    profile.refresh_from_db()
    assert profile.command != ["changed"]
