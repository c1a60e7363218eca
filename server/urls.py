from django.contrib import admin
from django.urls import include, path

from cocoon import views
from sandboxes.views import ArchiveView

urlpatterns = [
    path("healthz", views.healthz),
    path("v1/openapi.json", views.OpenApiView.as_view()),
    path("v1/sandboxes/<str:sandbox_id>/archive", ArchiveView.as_view()),
    path("admin/", admin.site.urls),
    path("", include("ui.urls")),
]

handler404 = views.json_not_found
