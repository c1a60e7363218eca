"""What this server is and runs on (system.info)."""

from typing import Any

from django.conf import settings

import cocoon
from sandboxes.drivers import detect_driver_kind, get_driver
from sandboxes.drivers.base import DriverError


def system_info() -> dict[str, Any]:
    try:
        driver = get_driver()
        capabilities, runtimes = driver.capabilities(), driver.runtimes()
    except DriverError:
        capabilities, runtimes = [], []
    return {
        "version": cocoon.__version__,
        "driverKind": detect_driver_kind(),
        "capabilities": capabilities,
        "runtimes": runtimes,
        "embeddedWorker": settings.CELERY_EMBEDDED,
        "languages": [code for code, _name in settings.LANGUAGES],
    }
