"""URLs of the bench servers: the app's API and admin as a host mounts them, the comparison views
(``bench.views``) and a stock ``ModelAdmin`` site (``bench.stock_admin``). Never part of the app."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from bench import stock_admin, views

urlpatterns = [
    path("api/", include("murmur_conversations.api.urls")),
    path("admin/", admin.site.urls),
    path("stock-admin/", stock_admin.site.urls),
    path("bench/drf-cursor/<uuid:id>/", views.DRFCursorPage.as_view()),
    path("bench/drf-limit-offset/<uuid:id>/", views.DRFLimitOffsetPage.as_view()),
    path("bench/plain-json/<uuid:id>/", views.plain_json),
    path("bench/raw-orjson/<uuid:id>/", views.raw_orjson),
    path("bench/save/<uuid:id>/", views.save),
    path("bench/queries/", views.queries),
]
