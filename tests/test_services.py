"""Core services called directly: settings, secrets, tokens, activity, first-run setup, i18n."""

from pathlib import Path

import pytest
from django.conf import settings

from cocoon import activity, config, settings_defaults, setup, tokens, vault
from cocoon.actors import SYSTEM_ACTOR
from cocoon.errors import CocoonError, ErrorCode
from cocoon.i18n import resolve_language
from cocoon.models import ActivityEntry, ApiToken, Secret, SettingsDocument

pytestmark = pytest.mark.django_db


def test_settings_update_deep_merges_and_keeps_defaults():
    document = config.update_settings({"sandbox": {"limits": {"cpus": 4}}}, actor=SYSTEM_ACTOR)
    assert document["sandbox"]["limits"] == {"cpus": 4, "memoryMb": 4096, "pids": 1024}
    assert document["general"] == settings_defaults.DEFAULTS["general"]
    assert SettingsDocument.objects.get().overrides == {"sandbox": {"limits": {"cpus": 4}}}


def test_settings_limits_may_not_exceed_the_admin_maxima():
    with pytest.raises(CocoonError) as error:
        config.update_settings({"sandbox": {"limits": {"pids": 10_000}}}, actor=SYSTEM_ACTOR)
    assert error.value.details["fields"][0]["path"] == "sandbox.limits.pids"
    assert config.get_settings()["sandbox"]["limits"]["pids"] == 1024


def test_settings_reset_reverts_paths_and_rejects_unknown_ones():
    config.update_settings(
        {"general": {"language": "de"}, "sandbox": {"network": "none"}}, actor=SYSTEM_ACTOR
    )
    document = config.reset_settings(["general.language"], actor=SYSTEM_ACTOR)
    assert (document["general"]["language"], document["sandbox"]["network"]) == ("en", "none")
    with pytest.raises(CocoonError) as error:
        config.reset_settings(["general.colour"], actor=SYSTEM_ACTOR)
    assert error.value.details["fields"][0]["path"] == "keys.0"
    assert config.reset_settings(None, actor=SYSTEM_ACTOR) == settings_defaults.DEFAULTS


def test_providers_are_validated_as_a_whole_after_merging():
    with pytest.raises(CocoonError) as error:
        config.update_settings({"providers": {"gateway": {"kind": "anthropic"}}}, actor=SYSTEM_ACTOR)
    assert error.value.details["fields"] == [
        {"path": "providers.gateway.baseUrl", "code": "required", "message": "This field is required."}
    ]
    provider = {"kind": "openai", "baseUrl": "http://localhost:11434/v1", "secret": "OLLAMA", "auth": "none"}
    document = config.update_settings({"providers": {"ollama": provider}}, actor=SYSTEM_ACTOR)
    assert document["providers"]["ollama"] == provider
    assert config.reset_settings(["providers.ollama"], actor=SYSTEM_ACTOR)["providers"] == {}


def test_secrets_are_encrypted_at_rest_and_readable_only_on_the_server():
    vault.set_secret("OPENAI_API_KEY", "sk-plain-value", actor=SYSTEM_ACTOR)
    stored = bytes(Secret.objects.get().ciphertext)
    assert b"sk-plain-value" not in stored
    assert vault.read_secret("OPENAI_API_KEY") == "sk-plain-value"
    assert Path(settings.SECRETS_KEY_FILE).stat().st_mode & 0o077 == 0
    vault.set_secret("OPENAI_API_KEY", "sk-rotated", actor=SYSTEM_ACTOR)
    assert vault.read_secret("OPENAI_API_KEY") == "sk-rotated"
    vault.delete_secret("OPENAI_API_KEY", actor=SYSTEM_ACTOR)
    with pytest.raises(CocoonError) as error:
        vault.delete_secret("OPENAI_API_KEY", actor=SYSTEM_ACTOR)
    assert error.value.code == ErrorCode.NOT_FOUND


def test_tokens_authenticate_by_hash_and_scope():
    token, plain = tokens.create_token("ci", "agent", actor=SYSTEM_ACTOR)
    assert token.token_hash == tokens.hash_token(plain)
    assert plain not in str(ApiToken.objects.values_list())
    actor = tokens.authenticate(plain)
    assert (actor.token_id, actor.scope, actor.is_admin) == (token.id, "agent", False)
    assert tokens.authenticate(plain + "x") is None
    assert tokens.authenticate(None) is None


def test_first_run_happens_once(tmp_path, settings):
    settings.ADMIN_TOKEN_FILE = tmp_path / "admin-token.txt"
    assert setup.first_run() is True
    plain = settings.ADMIN_TOKEN_FILE.read_text().strip()
    assert tokens.authenticate(plain).is_admin
    assert setup.first_run() is False
    assert settings.ADMIN_TOKEN_FILE.read_text().strip() == plain
    assert ApiToken.objects.count() == 1


def test_first_run_with_an_invalid_config_leaves_nothing_behind(tmp_path, settings):
    settings.ADMIN_TOKEN_FILE = tmp_path / "admin-token.txt"
    bad = tmp_path / "config.yaml"
    bad.write_text("sandbox:\n  network: everywhere\n")
    with pytest.raises(CocoonError):
        setup.first_run(bad)
    assert not settings.ADMIN_TOKEN_FILE.exists()
    assert not ApiToken.objects.exists()
    assert not SettingsDocument.objects.exists()
    assert not ActivityEntry.objects.exists()
    unreadable = tmp_path / "broken.yaml"
    unreadable.write_text("general: [\n")
    with pytest.raises(ValueError, match="COCOON_CONFIG"):
        setup.first_run(unreadable)


def test_activity_is_stored_as_key_and_params_and_rendered_per_language():
    entry = activity.record("secret.set", {"name": "X"}, actor=SYSTEM_ACTOR)
    assert (entry.key, entry.params, entry.actor) == ("secret.set", {"name": "X"}, "cocoon (system)")
    assert activity.render(entry.key, entry.params, "en") == "Secret X was saved."
    assert activity.render(entry.key, entry.params, "de") == "Secret X wurde gespeichert."
    with pytest.raises(ValueError, match="unregistered"):
        activity.record("made.up")


def test_language_resolution_order():
    assert resolve_language("de", "en-US") == "de"
    assert resolve_language(None, "fr-FR, de;q=0.8") == "de"
    assert resolve_language("xx", None) == "en"
    config.update_settings({"general": {"language": "de"}}, actor=SYSTEM_ACTOR)
    assert resolve_language(None, "fr") == "de"
