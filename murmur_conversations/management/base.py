"""What every management command of the app shares: an odd argument value is a ``CommandError``
(exit 2, a message naming the argument), never a traceback."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from murmur_conversations.jsonenc import clean_text


class AppCommand(BaseCommand):
    """A ``BaseCommand`` whose options that take one value are checked before ``handle``: argparse
    gives a list for some spellings (``--older-than=--``), which is refused with a
    ``CommandError`` (exit 2) naming the option; ``--database`` must name a configured alias."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        self._single = {
            action.dest: action.option_strings[-1] if action.option_strings else action.dest
            for action in parser._actions
            if action.nargs is None and action.dest != "help"
        }
        return parser

    def execute(self, *args: Any, **options: Any) -> Any:
        for dest, shown in getattr(self, "_single", {}).items():
            if isinstance(options.get(dest), list | tuple):
                raise CommandError(f"{shown} takes one value", returncode=2)
        database = options.get("database")
        if isinstance(database, str) and database not in connections:
            raise CommandError(
                f"--database {database!r} is not a configured database alias", returncode=2
            )
        return super().execute(*args, **options)


def owner_named(name: str) -> Any:
    """The user whose ``USERNAME_FIELD`` is ``name`` (``--owner``); ``CommandError`` (exit 2) when
    there is none, also for a name that holds NUL or bytes that are not UTF-8 (no user has it)."""
    model = get_user_model()
    owner = None
    if clean_text(name) == name:
        owner = model._default_manager.filter(**{model.USERNAME_FIELD: name}).first()
    if owner is None:
        raise CommandError(
            f"no user with {model.USERNAME_FIELD} {name!r}; --owner names an existing user",
            returncode=2,
        )
    return owner
