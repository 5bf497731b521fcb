"""Replaying a golden scenario (``tests/golden/__init__.py``): each step is a JSON object naming a
public service (``{"op": "save_message", "conv": "a", "message": {...}}``); ``play`` runs the
steps through ``murmur_conversations.services`` (and the import command) under a clock frozen at
``START`` plus one second per step, and returns, normalised, what each step returned or raised,
the signals it sent, and the state of every table of the app afterwards."""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command
from django.dispatch import Signal

from murmur_conversations import services, signals
from murmur_conversations.exceptions import ConversationsError
from murmur_conversations.models import Conversation, DisplayMessage
from tests.golden.normalise import REAL_NOW as real_now
from tests.golden.normalise import START, Normaliser, app_models, snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
USERS = ("alice", "bob")
#: The mtime of an imported file: a day before the scenario's first step.
MTIME_NS = int((START - timedelta(days=1)).timestamp()) * 1_000_000_000


def at(text: str | None) -> datetime | None:
    """A time of a step: ``"T+<seconds>"`` from ``START``, an ISO string, or None."""
    if text is None:
        return None
    if text.startswith("T+"):
        return START + timedelta(seconds=float(text[2:]))
    return datetime.fromisoformat(text)


class Player:
    """The scenario's names (conversations by ``as``, shares, users) and its frozen clock."""

    def __init__(self) -> None:
        self.users = {name: User.objects.create_user(name, password="pw") for name in USERS}
        self.conversations: dict[str, Any] = {}
        self.shares: dict[str, Any] = {}
        self.now = START
        self.files = tempfile.TemporaryDirectory()

    def conv(self, name: str | None) -> Any:
        return None if name is None else self.conversations[name]

    def user(self, name: str | None) -> User | None:
        return None if name is None else self.users[name]

    def run(self, step: dict[str, Any]) -> Any:
        args = {k: v for k, v in step.items() if k not in ("op", "conv", "as")}
        op = step["op"]
        if "conv" in step:
            args["conversation"] = self.conv(step["conv"])
        if op == "start":
            args["owner"] = self.user(args.get("owner"))
            if "parent" in args:
                args["parent"] = self.conv(args["parent"])
            made = services.start_conversation(**args)
            self.conversations[step["as"]] = made.pk
            return made
        if op == "fork":
            args["owner"] = self.user(args.get("owner"))
            made = services.fork_conversation(**args)
            self.conversations[step["as"]] = made.pk
            return made
        if op == "create_share":
            args["created_by"] = self.user(args["created_by"])
            share, token = services.create_share(**args)
            self.shares[step["as"]] = share.pk
            return [share, "<token>" if token else token]
        if op == "revoke_share":
            return services.revoke_share(share=self.shares[step["share"]])
        if op == "save_messages" and args.get("times") is not None:
            args["times"] = [at(t) for t in args["times"]]
        if op in ("save_synthetic_message", "set_status", "update_tool_status") and "at" in args:
            args["at"] = at(args["at"])
        if op == "recover_interrupted":
            args["stale_after"] = timedelta(seconds=args.pop("stale_after_seconds", 600))
        if op == "purge_conversations":
            args["owner"] = self.user(args.get("owner"))
            if "older_than_seconds" in args:
                args["older_than"] = timedelta(seconds=args.pop("older_than_seconds"))
        if op in ("set_feedback", "clear_feedback"):
            args["user"] = self.user(args["user"])
            args["display_message"] = DisplayMessage.objects.get(
                conversation_id=args["conversation"], seq=args.pop("seq")
            )
        if op == "import":
            return self.import_file(**args)
        return getattr(services, op)(**args)

    def import_file(self, path: str, owner: str, options: list[str] | None = None) -> Any:
        """``import_conversations`` of a file of ``tests/fixtures``, copied to the same path under
        ``FILES`` with its mtime at ``MTIME`` (a log without times is dated by its mtime); names
        each conversation it made by its ``external_id`` (``"import:<key>"``) and returns the
        command's output lines."""
        copy = Path(self.files.name) / path
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes((FIXTURES / path).read_bytes())
        os.utime(copy, ns=(MTIME_NS, MTIME_NS))
        before = set(Conversation.objects.values_list("pk", flat=True))
        out, err = io.StringIO(), io.StringIO()
        call_command(
            "import_conversations",
            str(copy),
            "--owner",
            owner,
            *(options or []),
            stdout=out,
            stderr=err,
        )
        made = Conversation.objects.exclude(pk__in=before).order_by("created_at", "external_id")
        for conversation in made:
            self.conversations[f"import:{conversation.external_id}"] = conversation.pk
        return {"stdout": out.getvalue().splitlines(), "stderr": err.getvalue().splitlines()}


@contextmanager
def listening(log: list[dict[str, Any]]) -> Iterator[None]:
    """Append each signal sent meanwhile to ``log``: its name, conversation and event_seq."""
    names = {getattr(signals, name): name for name in signals.__all__}

    def receiver(sender: object, signal: Signal, **kwargs: Any) -> None:
        conversation = kwargs.get("conversation")
        sent: dict[str, Any] = {
            "signal": names[signal],
            "conversation": getattr(conversation, "pk", kwargs.get("conversation_id")),
        }
        for key in ("event_seq", "stream_id", "text", "answer"):
            if key in kwargs:
                sent[key] = kwargs[key]
        if "rows" in kwargs:
            sent["rows"] = [row.seq for row in kwargs["rows"]]
        if "row" in kwargs:
            sent["row"] = kwargs["row"].seq
        if kwargs.get("tool_call") is not None:
            sent["tool_call"] = [kwargs["tool_call"].call_id, kwargs["tool_call"].status]
        if kwargs.get("child") is not None:
            sent["child"] = kwargs["child"].pk
        log.append(sent)

    for signal in names:
        signal.connect(receiver, weak=False)
    try:
        yield
    finally:
        for signal in names:
            signal.disconnect(receiver)


def play(steps: list[dict[str, Any]], monkeypatch: Any) -> dict[str, Any]:
    """Run ``steps`` (step i at ``START + i`` seconds); the normalised outcome."""
    player = Player()
    clock = lambda: player.now  # noqa: E731
    monkeypatch.setattr("django.utils.timezone.now", clock)
    for model in app_models():  # a field's default is the function itself, read at import
        for field in model._meta.concrete_fields:
            if field.default is real_now:  # Django caches it as the field's ``_get_default``
                monkeypatch.setattr(field, "default", clock)
                monkeypatch.setattr(field, "_get_default", clock, raising=False)
    normaliser = Normaliser(
        users={u.pk: name for name, u in player.users.items()}, files=player.files.name
    )
    outcomes: list[dict[str, Any]] = []
    for index, step in enumerate(steps):
        player.now = START + timedelta(seconds=index)
        sent: list[dict[str, Any]] = []
        outcome: dict[str, Any] = {"op": step["op"]}
        with listening(sent):
            try:
                outcome["returned"] = player.run(step)
            except ConversationsError as error:
                outcome["error"] = type(error).__name__
        outcome["signals"] = sent
        outcomes.append(outcome)
        normaliser.see_conversations()
    state = snapshot(normaliser)
    player.files.cleanup()
    return {"steps": normaliser.value(outcomes), "state": state}
