"""``manage.py demo_setup``: the demo login and demo conversations; safe and fast to re-run."""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from murmur_conversations import services
from project.demo.agent import run_demo_agent

SHORT_CHAT: list[dict[str, Any]] = [
    {"role": "user", "content": "What does `git bisect run` do?"},
    {
        "role": "assistant",
        "model": "gpt-4o-mini",
        "usage": {"prompt_tokens": 31, "completion_tokens": 48},  # OpenAI's spelling
        "content": "It runs a command at each bisection step and marks the "
        "commit good (exit 0) or bad (exit 1-127 except 125, which skips it), so the search for the "
        "first bad commit runs unattended.",
    },
]


class Command(BaseCommand):
    help = "Create the demo user (staff; password printed) and two demo conversations."

    def handle(self, *args: Any, **options: Any) -> None:
        username = os.environ.get("MURMUR_DEMO_USER", "demo")
        password = os.environ.get("MURMUR_DEMO_PASSWORD", "demo")
        user_model = get_user_model()
        user, created = user_model._default_manager.get_or_create(
            **{user_model.USERNAME_FIELD: username},
            defaults={"is_staff": True, "is_superuser": True},
        )
        if created or not user.check_password(password):
            user.set_password(password)
            user.save()
        chat = services.start_conversation(
            owner=user, title="git bisect run", source="demo", external_id="demo-bisect"
        )
        if chat.record_length == 0:
            services.save_messages(
                conversation=chat,
                messages=[
                    {**message, "id": f"demo-bisect-{index}"}
                    for index, message in enumerate(SHORT_CHAT)
                ],
            )
        nightly = services.start_conversation(
            owner=user, title="Why is the nightly slow?", source="demo", external_id="demo-nightly"
        )
        if nightly.record_length == 0:
            run_demo_agent(conversation=nightly, delay=0)
        self.stdout.write(f"Demo login: username {username!r}, password {password!r}")
