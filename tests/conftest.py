"""Fixtures of the library's tests (those both test sessions share are in the checkout's
``conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pytest_django import Settings

from murmur_conversations.realtime import broadcast
from tests.realtime_helpers import TIMEOUT, layer_settings


@pytest.fixture
def private_layer(settings: Settings) -> Iterator[dict[str, Any]]:
    """A fresh channel layer for the test; every queued live event is handled before teardown."""
    settings.CHANNEL_LAYERS = layer_settings()
    yield settings.CHANNEL_LAYERS
    assert broadcast.get_broadcaster().flush(TIMEOUT)
