"""``manage.py export_conversation ID [--format murmur|openai|anthropic|vercel-ui|ag-ui|openai-items|
otlp-json|otlp-proto] [--no-feedback] [--record-only]``: write a conversation's record to stdout
(``exporters``; docs/formats.md), murmur with its conversation and times lines, feedback lines
(unless ``--no-feedback``) and children, or with ``--record-only`` the record lines alone;
``otlp-proto`` as bytes. Exit 0, or 2 for an unknown or malformed id."""

from __future__ import annotations

import sys
from typing import IO, Any

from django.core.management.base import CommandError, CommandParser

from murmur_conversations.exporters import BINARY_EXPORTERS, EXPORTERS, export_murmur
from murmur_conversations.management.base import AppCommand
from murmur_conversations.models import Conversation
from murmur_conversations.selectors import parse_conversation_id


class Command(AppCommand):
    help = (
        "Write a conversation's record to stdout as murmur JSON Lines (default), an OpenAI or "
        "Anthropic list, a chat frontend's list (vercel-ui, ag-ui, openai-items), or OpenTelemetry "
        "GenAI spans (otlp-json, otlp-proto)."
    )
    stealth_options = ("binary_stdout",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("conversation", metavar="ID", help="the conversation id (a UUID)")
        parser.add_argument(
            "--format",
            default="murmur",
            help="murmur (default), openai, anthropic, vercel-ui, ag-ui, openai-items, otlp-json "
            "or otlp-proto",
        )
        parser.add_argument(
            "--no-feedback",
            action="store_true",
            help="murmur: leave out the feedback lines that follow the record",
        )
        parser.add_argument(
            "--record-only",
            action="store_true",
            help="murmur: only the record lines (no conversation, times or feedback lines, no "
            "children): the stored lines of a murmur import, byte for byte",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        exporter = EXPORTERS.get(options["format"])
        binary = BINARY_EXPORTERS.get(options["format"])
        if exporter is None and binary is None:
            names = [*EXPORTERS, *BINARY_EXPORTERS]
            raise CommandError(
                f"unknown --format {options['format']!r}; use {' or '.join(names)}",
                returncode=2,
            )
        pk = parse_conversation_id(options["conversation"])
        conversation = None if pk is None else Conversation.objects.filter(pk=pk).first()
        if conversation is None:
            raise CommandError(
                f"no conversation {options['conversation']!r} (ids are lowercase UUIDs)",
                returncode=2,
            )
        if binary is not None:
            out: IO[bytes] = options.get("binary_stdout") or sys.stdout.buffer
            for data in binary(conversation):
                out.write(data)
            out.flush()
            return
        assert exporter is not None
        lines = (
            export_murmur(
                conversation,
                feedback=not options["no_feedback"],
                record_only=options["record_only"],
            )
            if exporter is export_murmur
            else exporter(conversation)
        )
        for text in lines:
            self.stdout.write(text, ending="")
