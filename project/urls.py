"""URLs of the demo project: the admin under /admin/, the app's API under /api/."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]
