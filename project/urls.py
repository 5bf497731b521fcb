"""URLs of the demo project: the demo page at /, its login under /accounts/, the admin under
/admin/, the app's API under /api/ and its OpenAPI schema (drf-spectacular) at /api/schema/."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include("murmur_conversations.api.urls")),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="demo/login.html"),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("project.demo.urls")),
]
