"""URLs of the demo page: ``/`` (the page), ``/demo/run-agent/`` (the button's POST),
``/shared/<token>/`` (the read-only page of a share link) and ``/favicon.ico`` (for pages without
an icon link, such as the admin's)."""

from __future__ import annotations

from django.urls import path

from project.demo import views

app_name = "demo"

urlpatterns = [
    path("", views.index, name="index"),
    path("demo/run-agent/", views.run_agent, name="run-agent"),
    path("shared/<str:token>/", views.shared, name="shared"),
    path("favicon.ico", views.favicon, name="favicon"),
]
