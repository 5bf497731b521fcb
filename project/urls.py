"""URLs of the demo project: the admin under /admin/, the app's API under /api/ and its OpenAPI
schema (drf-spectacular) at /api/schema/."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include("murmur_conversations.api.urls")),
]
