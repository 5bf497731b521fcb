"""URLs of the demo page: ``/`` (the page) and ``/demo/run-agent/`` (the button's POST)."""

from __future__ import annotations

from django.urls import path

from project.demo import views

app_name = "demo"

urlpatterns = [
    path("", views.index, name="index"),
    path("demo/run-agent/", views.run_agent, name="run-agent"),
]
