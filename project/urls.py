"""URLs of the demo project: the demo page at /, its login under /accounts/, the admin under
/admin/, DRF's token endpoint at /api/token/, the app's API under /api/ and its OpenAPI schema
(drf-spectacular) at /api/schema/."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.utils import extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView
from rest_framework import serializers
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.request import Request
from rest_framework.response import Response


class TokenView(ObtainAuthToken):
    """DRF's ``obtain_auth_token``, unchanged but for its OpenAPI description (docs/api.md
    "Authentication"): POST ``username`` and ``password`` (JSON or form), get ``{"token"}`` for
    ``Authorization: Token <token>``; bad or missing credentials are DRF's 400 with messages by
    field (``non_field_errors``, ``username``, ``password``)."""

    @extend_schema(
        summary="A token for Authorization: Token, from a username and password",
        request=AuthTokenSerializer,
        responses={
            200: inline_serializer("TokenResponse", {"token": serializers.CharField()}),
            400: inline_serializer(
                "TokenError",  # DRF's validation errors: messages by field
                {
                    name: serializers.ListField(child=serializers.CharField(), required=False)
                    for name in ("non_field_errors", "username", "password")
                },
            ),
        },
        auth=[],
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The user's token, created on first use (one per user, reused)."""
        return super().post(request, *args, **kwargs)


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/token/", TokenView.as_view(), name="api-token"),
    path("api/", include("murmur_conversations.api.urls")),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="demo/login.html"),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("project.demo.urls")),
]
