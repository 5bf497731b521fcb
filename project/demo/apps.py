"""The demo project's own app: management commands that set up the demo."""

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "project.demo"
    label = "murmur_demo"
    verbose_name = "murmur_conversations demo"
