"""Settings for the test process: cocoon's own, on a private data directory.

The environment is cleaned before cocoon.settings reads it, so tests never touch a real ./.data or a
configured Redis or database; cocoond subprocesses started by the tests inherit the same clean slate.
"""

import os
import secrets
import tempfile

os.environ["COCOON_DATA"] = tempfile.mkdtemp(prefix="cocoon-test-")
os.environ["COCOON_VALIDATE_RESULTS"] = "1"
# Engine objects made by tests carry their own instance name, never a real instance's.
os.environ["COCOON_INSTANCE"] = f"cocoontest{secrets.token_hex(3)}"
# Tests build and install what they need themselves; the npm toolbox is cached across runs.
os.environ["COCOON_AUTO_INSTALL"] = "0"
os.environ["COCOON_TOOLBOX_CACHE"] = os.path.join(
    os.environ.get("COCOON_CACHE_DIR", "/var/cache/cocoon-ci"), "toolbox"
)
for name in (
    "REDIS_URL",
    "DATABASE_URL",
    "COCOON_TOKEN",
    "COCOON_CONFIG",
    "CONTAINER_HOST",
    "COCOON_URL",
    "COCOON_ALLOWED_HOSTS",
    "COCOON_TRUSTED_PROXIES",
):
    os.environ.pop(name, None)
# Every test client calls from 127.0.0.1, and suites present wrong tokens on purpose: the lock-out
# (cocoon.throttle) would end up refusing unrelated tests. tests/security/test_web_deployment.py
# starts its cocoonds with the real default.
os.environ["COCOON_AUTH_FAILURE_LIMIT"] = "10000/minute"
os.environ["COCOON_AUTH_USER_FAILURE_LIMIT"] = "10000/minute"
# Docker unless a suite says otherwise (auto-detection would prefer a Podman socket if one exists).
os.environ["COCOON_DRIVER"] = "docker"

from cocoon.settings import *  # noqa: E402, F403
