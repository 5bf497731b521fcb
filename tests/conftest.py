"""Fixtures of the library's tests (those both test sessions share are in the checkout's
``conftest.py``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_django import Settings

from murmur_conversations.realtime import broadcast
from tests.realtime_helpers import TIMEOUT, layer_settings


@pytest.fixture(autouse=True)
def _count_logged_writes_from_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frame log prunes itself after every FRAME_LOG_PRUNE_EVERY-th logged write of the
    process, so which test's write ran the prune (three more statements) hung on the tests before
    it: count from each test's start, so a test sees a prune only when it writes that often."""
    monkeypatch.setattr("murmur_conversations.services.writing._logged_writes", itertools.count(1))


@pytest.fixture
def private_layer(settings: Settings) -> Iterator[dict[str, Any]]:
    """A fresh channel layer for the test; every queued live event is handled before teardown."""
    settings.CHANNEL_LAYERS = layer_settings()
    yield settings.CHANNEL_LAYERS
    assert broadcast.get_broadcaster().flush(TIMEOUT)
