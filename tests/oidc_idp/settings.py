"""The test IdP's Django settings: its database, signing key and issuer come from the environment
(tests/test_sso.py starts it)."""

import os
from pathlib import Path

SECRET_KEY = "test-idp-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oidc_idp.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["IDP_DATABASE"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/login/"
# Cookies ignore ports: on 127.0.0.1 beside cocoond, the IdP's must not take the names of cocoon's.
SESSION_COOKIE_NAME, CSRF_COOKIE_NAME = "idp_session", "idp_csrftoken"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["IDP_KEY"]).read_text() if "IDP_KEY" in os.environ else "",
    "OIDC_ISS_ENDPOINT": os.environ.get("IDP_ISSUER", ""),
    "PKCE_REQUIRED": True,
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_idp.validator.GroupsValidator",
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email"},
}
