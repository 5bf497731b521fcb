"""``manage.py recover_interrupted``: mark runs whose worker went away (``services.recover_interrupted``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import CommandError, CommandParser

from murmur_conversations import services
from murmur_conversations.management.base import AppCommand
from murmur_conversations.selectors import parse_conversation_id

#: The longest ``--stale-after``: a hundred years, in seconds.
_MAX_SECONDS = 100 * 366 * 86400


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise CommandError(
            f"--stale-after must be a number of seconds, not {value!r}", returncode=2
        ) from None
    if not seconds >= 0:
        raise CommandError("--stale-after must be zero or more seconds", returncode=2)
    if not seconds <= _MAX_SECONDS:  # inf, or longer than a timedelta can hold
        raise CommandError(f"--stale-after must be at most {_MAX_SECONDS} seconds", returncode=2)
    return seconds


class Command(AppCommand):
    help = (
        "In conversations not saved for --stale-after seconds, mark pending and executing tool "
        "calls interrupted (worker_lost) and a running status interrupted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--stale-after",
            default="600",
            metavar="SECONDS",
            help="how long a conversation must be quiet (default 600)",
        )
        parser.add_argument("--conversation", metavar="ID", help="only this conversation")

    def handle(self, *args: Any, **options: Any) -> None:
        stale_after = timedelta(seconds=_seconds(options["stale_after"]))
        conversation = None
        if options["conversation"] is not None:
            conversation = parse_conversation_id(options["conversation"])
            if conversation is None:
                raise CommandError(
                    f"--conversation {options['conversation']!r} is not a "
                    "conversation id (a lowercase UUID)",
                    returncode=2,
                )
        changed = services.recover_interrupted(stale_after=stale_after, conversation=conversation)
        self.stdout.write(f"{changed} conversation(s) marked interrupted")
