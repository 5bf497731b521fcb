"""Concurrent writers on separate connections for the concurrency tests (docs/architecture.md and
docs/write-path.md): threads started at one barrier, their results and errors checked."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connections

from murmur_conversations.exceptions import ConversationsError, WriteConflict

T = TypeVar("T")


def run_threads(
    count: int,
    target: Callable[[int], T],
    *,
    expected: tuple[type[ConversationsError], ...] = (WriteConflict,),
) -> tuple[list[T | None], list[ConversationsError | None]]:
    """Start ``count`` threads at one barrier; return (results, errors) in thread order.

    A thread may fail only with one of the ``expected`` errors (by default ``WriteConflict``,
    the retryable one): anything else (a raw database error above all) fails the test here,
    with every such error listed."""
    barrier = threading.Barrier(count)
    results: list[T | None] = [None] * count
    raised: list[BaseException | None] = [None] * count

    def work(index: int) -> None:
        try:
            barrier.wait()
            results[index] = target(index)
        except BaseException as error:  # every error is checked below, none is dropped
            raised[index] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    unexpected = [e for e in raised if e is not None and not isinstance(e, expected)]
    assert unexpected == [], [repr(e) for e in unexpected]
    errors = [e if isinstance(e, ConversationsError) else None for e in raised]
    return results, errors
