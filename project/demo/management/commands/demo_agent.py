"""``manage.py demo_agent``: play the scripted demo agent run into a conversation."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from murmur_conversations import services
from murmur_conversations.selectors import parse_conversation_id
from project.demo.agent import run_demo_agent


class Command(BaseCommand):
    help = "Play the scripted demo agent run (streamed text, tool calls, a question)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--owner", default="demo", help="username of the owner (default demo)")
        parser.add_argument(
            "--conversation", metavar="ID", help="play into this conversation (default: a new one)"
        )
        parser.add_argument(
            "--delay",
            type=float,
            default=0.3,
            help="seconds between steps (default 0.3; 0 for none)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        owner = user_model._default_manager.filter(
            **{user_model.USERNAME_FIELD: options["owner"]}
        ).first()
        if owner is None:
            raise CommandError(
                f"no user {options['owner']!r}; run manage.py demo_setup first", returncode=2
            )
        if options["delay"] < 0:
            raise CommandError("--delay must be zero or more seconds", returncode=2)
        if options["conversation"]:
            conversation_id = parse_conversation_id(options["conversation"])
            if conversation_id is None:
                raise CommandError("--conversation must be a conversation id", returncode=2)
            conversation = services.start_conversation(owner=owner, conversation_id=conversation_id)
        else:
            conversation = services.start_conversation(
                owner=owner, title="Why is the nightly slow?"
            )
        run_demo_agent(conversation=conversation, delay=options["delay"])
        self.stdout.write(f"Played the demo agent into conversation {conversation.pk}")
