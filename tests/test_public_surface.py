"""What a host may import (README "What a host may import"): the declared ``__all__`` lists, the
version, and one async twin per service (docs/write-path.md "Async runtimes")."""

from __future__ import annotations

import importlib
import importlib.metadata
from datetime import timedelta
from typing import NoReturn

import pytest
from asgiref.sync import SyncToAsync
from django.contrib.auth.models import User

import murmur_conversations
from murmur_conversations import services
from murmur_conversations.models import SourceRecord, ToolCall

DECLARED = [
    "murmur_conversations",
    "murmur_conversations.services",
    "murmur_conversations.signals",
    "murmur_conversations.exceptions",
    "murmur_conversations.hooks",
    "murmur_conversations.logfilters",
    "murmur_conversations.realtime.routing",
    "murmur_conversations.realtime.middleware",
    "murmur_conversations.realtime.layers",
    "murmur_conversations.middleware",
    "murmur_conversations.outage",
    "murmur_conversations.mcp.http",
]


@pytest.mark.parametrize("name", DECLARED)
def test_every_declared_name_exists_and_is_public(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__, name
    for exported in module.__all__:
        assert hasattr(module, exported), f"{name}.{exported}"
        assert exported == "__version__" or not exported.startswith("_")


def test_version_comes_from_the_installed_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    assert murmur_conversations.__version__ == importlib.metadata.version("murmur-conversations")

    def not_installed(name: str) -> NoReturn:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    try:
        assert importlib.reload(murmur_conversations).__version__ == "0.0.0+unknown"
    finally:
        monkeypatch.undo()
        importlib.reload(murmur_conversations)
    assert murmur_conversations.__version__ == importlib.metadata.version("murmur-conversations")


def test_every_service_has_an_async_twin() -> None:
    names = set(services.__all__)
    constants = {n for n in names if n.isupper()}
    sync = {n for n in names if n.islower() and f"a{n}" in names}  # answer_* starts with "a" too
    assert constants == {
        "ALLOWED_MOVES",
        "MAX_ANSWER_CHARS",
        "MAX_COMMENT_CHARS",
        "MAX_HOLD_REASON",
        "MAX_SHARE_SECONDS",
        "MAX_TAGS",
        "MAX_TAG_CHARS",
        "UNSET",
    }
    assert names == sync | {f"a{n}" for n in sync} | constants
    for name in sync:
        twin = getattr(services, f"a{name}")
        assert isinstance(twin, SyncToAsync), name
        assert twin.func is getattr(services, name)


@pytest.mark.django_db(transaction=True)
async def test_the_new_async_twins_do_what_their_services_do(user: User) -> None:
    conversation = await services.astart_conversation(owner=user, title="twins")
    record = {"source_key": "k1", "line_number": 1, "raw": "{}", "record_type": "x"}
    added = await services.asave_source_records(
        conversation=conversation, source="murmur", records=[record, record]
    )
    assert added == 1
    assert await SourceRecord.objects.filter(conversation=conversation).acount() == 1
    await services.asave_message(
        conversation=conversation,
        message={"role": "assistant", "content": [{"type": "tool_call", "id": "c1", "name": "t"}]},
    )
    assert await services.arecover_interrupted(stale_after=timedelta(seconds=-1)) == 1
    assert (await ToolCall.objects.aget(call_id="c1")).status == "interrupted"
    assert await services.apurge_conversations(owner=user) == (1, False)
