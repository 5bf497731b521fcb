"""Shared database reads of the tail (``realtime.shared``): one read per key and window, shared
by every caller of the event loop; errors shared too; a cancelled caller never cancels the read."""

from __future__ import annotations

import asyncio

import pytest

from murmur_conversations.realtime.shared import SharedReads, shared_reads


async def test_concurrent_callers_share_one_read() -> None:
    reads, gate = SharedReads(), asyncio.Event()
    calls: list[int] = []

    async def fetch() -> str:
        calls.append(1)
        await gate.wait()
        return "row"

    waiters = [asyncio.ensure_future(reads.read("k", window=60, fetch=fetch)) for _ in range(50)]
    await asyncio.sleep(0)  # let every waiter ask (a scheduling point, not a timing wait)
    gate.set()
    assert await asyncio.gather(*waiters) == ["row"] * 50
    assert len(calls) == 1
    assert await reads.read("k", window=60, fetch=fetch) == "row"  # still within the window
    assert len(calls) == 1


async def test_other_keys_and_expired_windows_read_again() -> None:
    reads = SharedReads()
    calls: list[int] = []

    async def fetch() -> int:
        calls.append(1)
        return len(calls)

    assert await reads.read("a", window=60, fetch=fetch) == 1
    assert await reads.read("b", window=60, fetch=fetch) == 2
    assert await reads.read("a", window=0, fetch=fetch) == 3  # a zero window never shares


async def test_errors_are_shared_and_a_cancelled_caller_keeps_the_read_alive() -> None:
    reads, gate = SharedReads(), asyncio.Event()

    async def failing() -> None:
        await gate.wait()
        raise RuntimeError("database down")

    first = asyncio.ensure_future(reads.read("k", window=60, fetch=failing))
    second = asyncio.ensure_future(reads.read("k", window=60, fetch=failing))
    await asyncio.sleep(0)
    first.cancel()
    gate.set()
    with pytest.raises(RuntimeError, match="database down"):
        await second
    assert first.cancelled()


async def test_one_shared_reads_per_event_loop() -> None:
    assert shared_reads() is shared_reads()
