"""Django settings for cocoon.

Deployment knobs come from the environment (see README); everything a user edits at run time lives in
the database behind cocoon.config (the settings service), not here.
"""

import re
import secrets
from ipaddress import ip_network
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured
from redis.exceptions import ConnectionError as RedisConnectionError

from cocoon.datadir import ensure_private_dir, read_or_create_private_file
from cocoon.env import env_bool, env_list, env_path, env_str, parse_bind

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = ensure_private_dir(env_path("COCOON_DATA", BASE_DIR / ".data"))
COCOON_BIND = env_str("COCOON_BIND", "127.0.0.1:7420")
COCOON_DRIVER = env_str("COCOON_DRIVER", "auto")
# Prefix and label of every engine object this instance makes; instances sharing an engine differ here.
COCOON_INSTANCE = env_str("COCOON_INSTANCE", "cocoon")
# Every docker/podman sandbox gets its own /28 network from this range (must not overlap the engine's
# default-address-pools or the host's networks).
COCOON_SANDBOX_SUBNETS = env_str("COCOON_SANDBOX_SUBNETS", "10.201.0.0/16")
# The unprivileged host uid that runs bwrap sandboxes when cocoond itself runs as root.
COCOON_BWRAP_UID = int(env_str("COCOON_BWRAP_UID", "100000"))
# ...and where their folders live then (as another user it is COCOON_DATA/sandboxes).
COCOON_BWRAP_ROOT = env_path("COCOON_BWRAP_ROOT", Path("/var/lib/cocoon-bwrap"))
COCOON_TOKEN = env_str("COCOON_TOKEN")
COCOON_CONFIG = env_str("COCOON_CONFIG")
REDIS_URL = env_str("REDIS_URL")
ADMIN_TOKEN_FILE = DATA_DIR / "admin-token.txt"
# npm staging folders for the toolbox, keyed by package list; CI points this at a persistent cache.
COCOON_TOOLBOX_CACHE = env_path("COCOON_TOOLBOX_CACHE", DATA_DIR / "toolbox-cache")
# First start builds the sandbox image and installs the toolbox in the background unless this is off.
COCOON_AUTO_INSTALL = env_bool("COCOON_AUTO_INSTALL", True)
# Agent status pushed by a watcher stream per sandbox (agents.watch); off: only the 2 s poll.
COCOON_WATCH_AGENTS = env_bool("COCOON_WATCH_AGENTS", True)
SECRETS_KEY_FILE = DATA_DIR / "secrets.key"

# This data directory's identity, made on its first start: every engine object cocoond makes carries it
# (label io.cocoon.data), so objects another data directory left under the same instance name are told apart.
COCOON_DATA_ID = read_or_create_private_file(DATA_DIR / "data-id", lambda: secrets.token_hex(8))

SECRET_KEY = env_str("COCOON_SECRET_KEY") or read_or_create_private_file(
    DATA_DIR / "django-secret-key.txt", lambda: secrets.token_urlsafe(50)
)
DEBUG = env_bool("COCOON_DEBUG")

# -- web deployment --------------------------------------------------------------------------------
# cocoond binds to loopback; remote access goes through the TLS reverse proxy in deploy/Caddyfile, whose
# public address COCOON_URL names. Host names, trusted origins and secure cookies all follow from it.
COCOON_URL = env_str("COCOON_URL").rstrip("/")
PUBLIC_URL = urlsplit(COCOON_URL)
if COCOON_URL and (PUBLIC_URL.scheme not in ("http", "https") or not PUBLIC_URL.hostname):
    raise ImproperlyConfigured(f"COCOON_URL must look like https://cocoon.example.com, got {COCOON_URL!r}")
BIND_HOST = parse_bind(COCOON_BIND)[0]
# Any other Host is refused (400): a DNS-rebinding page reaches us under its own name. Loopback names
# are for cocoond's own clients (CLI, tests); a wildcard bind is no name anyone browses to.
ALLOWED_HOSTS = [PUBLIC_URL.hostname] if PUBLIC_URL.hostname else []
ALLOWED_HOSTS += ["localhost", "127.0.0.1", "[::1]", *env_list("COCOON_ALLOWED_HOSTS")]
if BIND_HOST not in {"0.0.0.0", "::"}:  # noqa: S104 - a comparison, not a bind
    ALLOWED_HOSTS.append(f"[{BIND_HOST}]" if ":" in BIND_HOST else BIND_HOST)
CSRF_TRUSTED_ORIGINS = [f"{PUBLIC_URL.scheme}://{PUBLIC_URL.netloc}"] if COCOON_URL else []
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = PUBLIC_URL.scheme == "https"
# Browsers that once reached us over TLS keep to it (sent only on requests that came over TLS).
SECURE_HSTS_SECONDS = 365 * 24 * 3600 if SESSION_COOKIE_SECURE else 0
# Only these peers may say who the client is and that it came over TLS (X-Forwarded-For/-Proto):
# cocoon.middleware.ForwardedMiddleware. None by default: nobody's forwarding headers count.
try:
    COCOON_TRUSTED_PROXIES = [ip_network(entry, strict=False) for entry in env_list("COCOON_TRUSTED_PROXIES")]
except ValueError as error:
    raise ImproperlyConfigured(f"COCOON_TRUSTED_PROXIES: {error}") from None
# cocoon.throttle, in the `limits` library's syntax: wrong tokens per client address before its wrong
# ones get rate_limited (a valid token always passes), and wrong passwords per user name and address
# before that name is locked there; per user name across every address, the slower second limit.
COCOON_AUTH_FAILURE_LIMIT = env_str("COCOON_AUTH_FAILURE_LIMIT") or "20/5 minutes"
COCOON_AUTH_USER_FAILURE_LIMIT = env_str("COCOON_AUTH_USER_FAILURE_LIMIT") or "100/hour"
AUTHENTICATION_BACKENDS = ["cocoon.throttle.ThrottledModelBackend"]
# Off: no user name and password logs in anywhere (the UI, /admin/login); single sign-on and tokens do.
COCOON_PASSWORD_LOGIN = env_bool("COCOON_PASSWORD_LOGIN", True)

# -- single sign-on (OpenID Connect, ui/sso.py) ------------------------------------------------------
# The provider's issuer URL (its discovery document is ISSUER/.well-known/openid-configuration) and this
# server's client there; unset: no single sign-on.
COCOON_OIDC_ISSUER = env_str("COCOON_OIDC_ISSUER").rstrip("/")
ISSUER = urlsplit(COCOON_OIDC_ISSUER)
COCOON_OIDC_CLIENT_ID = env_str("COCOON_OIDC_CLIENT_ID")
COCOON_OIDC_CLIENT_SECRET = env_str("COCOON_OIDC_CLIENT_SECRET")
COCOON_OIDC_SCOPES = env_str("COCOON_OIDC_SCOPES") or "openid profile email"
COCOON_OIDC_NAME = env_str("COCOON_OIDC_NAME") or "single sign-on"  # the login button's provider name
COCOON_OIDC_GROUPS_CLAIM = env_str("COCOON_OIDC_GROUPS_CLAIM") or "groups"
if COCOON_OIDC_ISSUER and not (
    ISSUER.scheme in ("http", "https") and ISSUER.netloc and COCOON_OIDC_CLIENT_ID
):
    raise ImproperlyConfigured("COCOON_OIDC_ISSUER must be an http(s) URL and needs COCOON_OIDC_CLIENT_ID")
# What the groups claim grants, comma-separated: GROUP=PROJECT:ROLE (owner, member, viewer) or
# GROUP=admin (a server admin). At each sign-on a person's role in every project named here (and whether
# they are an admin, once any GROUP=admin is given) follows their groups; other projects are left as set.
COCOON_OIDC_GROUPS: list[tuple[str, str, str]] = []
for entry in env_list("COCOON_OIDC_GROUPS"):
    group, _sep, grant = (part.strip() for part in entry.partition("="))
    project, _sep, role = (part.strip() for part in grant.partition(":"))
    if grant == "admin" and group:
        COCOON_OIDC_GROUPS.append((group, "", "admin"))
    elif (
        group and re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", project) and role in ("owner", "member", "viewer")
    ):
        COCOON_OIDC_GROUPS.append((group, project, role))
    else:
        raise ImproperlyConfigured(
            f"COCOON_OIDC_GROUPS: {entry!r} is neither GROUP=PROJECT:owner|member|viewer nor GROUP=admin"
        )
# The UI loads only its own scripts (templates carry none inline); xterm.js writes <style> elements.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        # A logout goes on to the single sign-on provider's (ui/sso.py), which ends its session too.
        "form-action": [SELF, *([f"{ISSUER.scheme}://{ISSUER.netloc}"] if COCOON_OIDC_ISSUER else [])],
        "frame-ancestors": [NONE],
    }
}

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "channels",
    "cocoon",
    "sandboxes",
    "agents",
    "egress",
    "scheduling",
    "usage",
    "attention",
    "ui",
    "server",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "cocoon.auth.AdminSessionMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

ROOT_URLCONF = "server.urls"
ASGI_APPLICATION = "server.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# SQLite in WAL mode with IMMEDIATE transactions, so cocoond and separate Celery workers can write
# the same file without "database is locked" surprises.
SQLITE_OPTIONS = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'cocoon.sqlite3'}",
        # Django runs each request in a thread of its own that ends with it, so persistent connections
        # would only pile up (Django's advice for ASGI). The RPC pool's threads keep their SQLite
        # connection from call to call themselves (cocoon/calls.py).
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = SQLITE_OPTIONS

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "cocoon" / "locale"]
USE_I18N = True
TIME_ZONE = "UTC"
USE_TZ = True

# RPC bodies carry files (files.write) and patches (sandbox.apply_patch).
DATA_UPLOAD_MAX_MEMORY_SIZE = 40 * 1024 * 1024

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["cocoon.auth.TokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "cocoon.views.exception_handler",
    "UNAUTHENTICATED_USER": None,
}

# Without Redis everything runs inside cocoond: an in-memory channel layer and an in-process Celery
# worker + beat on the in-memory broker. REDIS_URL moves both to Redis so workers can be separate.
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # Every consumer waits on Redis with a blocking pop of up to 5 s, redis-py's default read
            # timeout: the two raced, and an idle WebSocket died with 1011 after about 5 s.
            # After a Redis restart every pooled connection is dead: a command on one is retried once,
            # on a new connection, instead of failing the WebSocket that happened to pick it.
            "CONFIG": {
                "hosts": [
                    {"address": REDIS_URL, "socket_timeout": 30, "retry_on_error": [RedisConnectionError]}
                ],
                "prefix": "cocoon",
            },
        }
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://localhost/"
    # The in-memory queue is polled (kombu's default: once a second): a task sent for now (a
    # notification, a watcher to open) waited up to 1 s for the embedded worker.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"polling_interval": 0.05}
CELERY_EMBEDDED = not REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_TIMEZONE = "UTC"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("COCOON_LOG_LEVEL", "INFO")},
    "loggers": {"celery": {"level": "WARNING"}, "daphne": {"level": "WARNING"}},
}

# Check every method's result against its declared schema (on in tests, so declarations stay honest).
COCOON_VALIDATE_RESULTS = env_bool("COCOON_VALIDATE_RESULTS", DEBUG)

# Task runs driven at once; the rest wait queued. Each holds a worker thread for its whole run, so the
# embedded worker has this many threads plus EMBEDDED_SPARE_THREADS for the poller, ticks and calls.
COCOON_TASK_CONCURRENCY = int(env_str("COCOON_TASK_CONCURRENCY", "3"))
EMBEDDED_SPARE_THREADS = 4
