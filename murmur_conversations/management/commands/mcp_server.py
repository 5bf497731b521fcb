"""``manage.py mcp_server --owner USERNAME``: serve the MCP server (docs/mcp.md) on stdin and
stdout for one user, the way an MCP client (Claude Desktop, Claude Code, an IDE) starts a local
server: the operator who runs it acts for that owner. Runs until the client closes stdin; exit
0, or 2 for an unknown or inactive owner or a missing ``mcp`` package."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from murmur_conversations.management.base import AppCommand, owner_named


class Command(AppCommand):
    help = (
        "Serve the MCP server over stdio for one user: agents search, list and read that "
        "user's conversations; every read is written to the user's access log."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--owner", required=True, help="the username of the user the server acts for"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            import anyio

            from murmur_conversations.mcp.server import serve_stdio
        except ImportError as error:
            raise CommandError(
                f"the MCP server needs the mcp package ({error}); install "
                "murmur-conversations[mcp]",
                returncode=2,
            ) from None
        owner = owner_named(options["owner"])
        if not owner.is_active:
            raise CommandError(
                f"user {options['owner']!r} is inactive; the server acts for active users only",
                returncode=2,
            )
        anyio.run(serve_stdio, owner)
