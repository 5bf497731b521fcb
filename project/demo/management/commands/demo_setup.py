"""``manage.py demo_setup``: create (or reset the password of) the demo login and print it."""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the demo user (username and password 'demo', staff) and print the login."

    def handle(self, *args: Any, **options: Any) -> None:
        username = os.environ.get("MURMUR_DEMO_USER", "demo")
        password = os.environ.get("MURMUR_DEMO_PASSWORD", "demo")
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            **{user_model.USERNAME_FIELD: username},
            defaults={"is_staff": True, "is_superuser": True},
        )
        if created or not user.check_password(password):
            user.set_password(password)
            user.save()
        self.stdout.write(f"Demo login: username {username!r}, password {password!r}")
