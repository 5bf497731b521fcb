"""URLs of the library's test suite: the app's API under /api/ with its OpenAPI schema at
/api/schema/ (docs/api.md), the admin under /admin/."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include("murmur_conversations.api.urls")),
]
