"""The baseline for bench/rpc.py: a bare Django view on Daphne, no auth, no registry, no database.

Run by the benchmark as `daphne bench.bare_django:application`.
"""

import django
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.http import JsonResponse
from django.urls import path

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench-only",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=[],
    INSTALLED_APPS=[],
)
django.setup()


def system_info(request):
    return JsonResponse({"result": {"version": "0.1.0", "driverKind": None}})


urlpatterns = [path("v1/rpc/system.info", system_info)]
application = get_asgi_application()
