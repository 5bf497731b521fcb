"""The benchmarks: one builder per path of the issue's table, per track (PostgreSQL or SQLite).

Each builder creates its own conversations (one per variant, so no variant reads another's rows),
returns a :class:`~bench.harness.Benchmark` and leaves timing to the harness. Units: an *item* is a
message appended or a page read; latencies are per operation (one call).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import psycopg

from bench import django_setup, floors, peers, workload
from bench.harness import Benchmark, RatioSpec, Variant
from bench.stats import Target


@dataclass(frozen=True)
class Sizes:
    """How much work one round does, per mode."""

    append_ops: int
    batch_size: int
    batch_ops: int
    page_size: int
    page_ops: int
    depths: tuple[int, ...]
    search_rows: int = 10_000  # display rows the search benchmark searches
    search_ops: int = 10


QUICK = Sizes(
    append_ops=40, batch_size=100, batch_ops=3, page_size=50, page_ops=20, depths=(0, 10_000)
)
FULL = Sizes(
    append_ops=120,
    batch_size=100,
    batch_ops=8,
    page_size=50,
    page_ops=40,
    depths=(0, 10_000, 1_000_000),
    search_rows=1_000_000,
    search_ops=10,
)


@dataclass
class Track:
    """Where a track runs: the Django alias and a bare driver connection to the same database."""

    name: str
    alias: str
    raw: psycopg.Connection[Any] | sqlite3.Connection
    langchain: psycopg.Connection[Any] | None = None  # PostgreSQL track with the peer installed
    #: SQLite track with langchain-community installed: the track's SQLite file.
    langchain_sqlite: str | None = None

    @property
    def is_postgres(self) -> bool:
        return isinstance(self.raw, psycopg.Connection)

    @property
    def noindex_alias(self) -> str:
        """The alias of the same schema without the full-text index (``django_setup``)."""
        return "pg_noindex" if self.is_postgres else "sqlite_noindex"


PROTO_SSB = "proto: ours + server_side_binding"


def _server_side_binding(
    operation: Callable[[], object], operations: int, suffix: str = ""
) -> Variant:
    """Prototype, not a product setting yet: the same call through a connection with Django's
    ``server_side_binding`` option (psycopg prepares repeated statements)."""
    return Variant(f"{PROTO_SSB}{suffix}", django_setup.on_alias("pg_ssb", operation), operations)


REDACTION_OFF = "ours, redaction off"


def _redaction_off(operation: Callable[[], object]) -> Callable[[], object]:
    """``operation`` with ``MURMUR_CONVERSATIONS["REDACT"]["ENABLED"] = False`` (docs/write-path.md
    "Redaction"): the settings object is swapped for the call, as a host may do, so both
    compiled redactors stay cached and the variants differ only in redaction."""
    from django.conf import settings

    on = getattr(settings, "MURMUR_CONVERSATIONS", {})
    off = {**on, "REDACT": {**on.get("REDACT", {}), "ENABLED": False}}

    def run() -> object:
        settings.MURMUR_CONVERSATIONS = off
        try:
            return operation()
        finally:
            settings.MURMUR_CONVERSATIONS = on

    return run


FRAME_LOG_OFF = "ours, frame log off"


def frame_log_off(operation: Callable[[], object]) -> Callable[[], object]:
    """``operation`` with ``MURMUR_CONVERSATIONS["FRAME_LOG"] = False`` (docs/websocket.md "The
    frame log"), the settings object swapped for the call: what logging each event's frames costs
    a write, as its own line."""
    from django.conf import settings

    on = getattr(settings, "MURMUR_CONVERSATIONS", {})
    off = {**on, "FRAME_LOG": False}

    def run() -> object:
        settings.MURMUR_CONVERSATIONS = off
        try:
            return operation()
        finally:
            settings.MURMUR_CONVERSATIONS = on

    return run


def _redaction_ratio() -> RatioSpec:
    """Redaction on (the default) against off, per round, p50 (the 1.2x target)."""
    return RatioSpec(
        "redaction on / off p50",
        "ours save_message",
        REDACTION_OFF,
        "p50",
        "time",
        Target("<=", 1.2),
    )


def _new_conversation(title: str) -> uuid.UUID:
    from murmur_conversations import services

    return services.start_conversation(owner=None, title=title).pk


# --------------------------------------------------------------------------- without the index

NO_INDEX = "no search index"


def _one(*, usage: bool = False, conversation: uuid.UUID | None = None) -> Callable[[], None]:
    """One plain message per call (with Anthropic-style ``usage`` and ``model`` when ``usage``)
    into ``conversation``, or into a conversation of the active alias made on first use."""
    from murmur_conversations import services

    state: dict[str, uuid.UUID] = {}
    if conversation is not None:
        state["conv"] = conversation

    def operation() -> None:
        if "conv" not in state:
            state["conv"] = _new_conversation("bench append one (no index)")
        message: dict[str, Any] = {"role": "user", "content": workload.text()}
        if usage:
            message = {**message, "role": "assistant", **workload.usage()}
        services.save_message(conversation=state["conv"], message=message)

    return operation


def _batch(size: int) -> Callable[[], None]:
    from murmur_conversations import services

    state: dict[str, uuid.UUID] = {}

    def operation() -> None:
        if "conv" not in state:
            state["conv"] = _new_conversation("bench batch (no index)")
        services.save_messages(conversation=state["conv"], messages=list(workload.messages(size)))

    return operation


def _without_index(
    track: Track, name: str, operation: Callable[[], None], operations: int, items: int = 1
) -> Variant:
    """``operation`` on the track's twin database without the full-text index (same schema,
    index dropped): the index's cost on the same path in the same run."""
    return Variant(
        f"{name}, {NO_INDEX}",
        django_setup.on_alias(track.noindex_alias, operation),
        operations,
        items,
    )


# --------------------------------------------------------------------------- append one


def append_one(track: Track, sizes: Sizes) -> Benchmark:
    """Append one plain text message per call, committed. Unit: messages."""
    from murmur_conversations import services

    ours_conv = _new_conversation("bench append one (ours)")
    floor_conv = _new_conversation("bench append one (floor)")

    def ours() -> None:
        services.save_message(
            conversation=ours_conv, message={"role": "user", "content": workload.text()}
        )

    if isinstance(track.raw, psycopg.Connection):
        pg_floor = floors.pg_append_one(track.raw, floor_conv)

        def floor() -> None:
            pg_floor(workload.text())

        floor_name = "raw psycopg, 1 statement"
    else:
        sqlite_floor = floors.sqlite_append_batch(track.raw, floor_conv)

        def floor() -> None:
            sqlite_floor([workload.text()])

        floor_name = "raw sqlite3, 1 transaction"
    off_conv = _new_conversation("bench append one (redaction off)")

    def ours_off() -> None:
        services.save_message(
            conversation=off_conv, message={"role": "user", "content": workload.text()}
        )

    variants = [
        Variant("ours save_message", ours, sizes.append_ops),
        Variant(floor_name, floor, sizes.append_ops),
        Variant(REDACTION_OFF, _redaction_off(ours_off), sizes.append_ops),
        Variant(
            FRAME_LOG_OFF,
            frame_log_off(_one(conversation=_new_conversation("bench append one (no log)"))),
            sizes.append_ops,
        ),
        _without_index(track, "ours save_message", _one(), sizes.append_ops),
        Variant("ours save_message with usage", _one(usage=True), sizes.append_ops),
    ]
    if track.is_postgres:
        variants.append(_server_side_binding(ours, sizes.append_ops))
    ratios = [
        RatioSpec(
            "ours p50 / floor p50",
            "ours save_message",
            floor_name,
            "p50",
            "time",
            Target("<=", 1.3),
        ),
        RatioSpec("ours mean / floor mean", "ours save_message", floor_name, "mean", "time"),
        RatioSpec(
            f"ours p50 / {NO_INDEX} p50",
            "ours save_message",
            f"ours save_message, {NO_INDEX}",
            "p50",
            "time",
            Target("<=", 1.1),
        ),
        RatioSpec(
            "with usage p50 / plain p50",
            "ours save_message with usage",
            "ours save_message",
            "p50",
            "time",
        ),
        RatioSpec(f"{PROTO_SSB} p50 / floor p50", PROTO_SSB, floor_name, "p50", "time"),
        _redaction_ratio(),
        RatioSpec("frame log on / off p50", "ours save_message", FRAME_LOG_OFF, "p50", "time"),
    ]
    if track.langchain is not None:
        history = peers.langchain_history(track.langchain)
        variants.append(
            Variant(
                "langchain add_message",
                lambda: history.add_message(workload.text()),
                sizes.append_ops,
            )
        )
        ratios += [
            RatioSpec(
                "ours throughput / langchain",
                "ours save_message",
                "langchain add_message",
                "mean",
                "throughput",
                Target(">=", 0.9),
            ),
            RatioSpec(
                "langchain p50 / floor p50", "langchain add_message", floor_name, "p50", "time"
            ),
        ]
    if track.langchain_sqlite is not None:
        sqlite_history = peers.langchain_sqlite_history(track.langchain_sqlite)
        variants.append(
            Variant(
                peers.LANGCHAIN_SQLITE,
                lambda: sqlite_history.add_message(workload.text()),
                sizes.append_ops,
            )
        )
        ratios += [
            RatioSpec(
                f"ours p50 / {peers.LANGCHAIN_SQLITE} p50",
                "ours save_message",
                peers.LANGCHAIN_SQLITE,
                "p50",
                "time",
            ),
            RatioSpec(
                f"{peers.LANGCHAIN_SQLITE} p50 / floor p50",
                peers.LANGCHAIN_SQLITE,
                floor_name,
                "p50",
                "time",
            ),
        ]
    return Benchmark(
        name=f"{track.name}: append 1",
        description="one plain text message per call, committed (record row, display row, counters)",
        unit="msg",
        variants=variants,
        ratios=ratios,
    )


# --------------------------------------------------------------------------- append a batch


def append_batch(track: Track, sizes: Sizes) -> Benchmark:
    """Append a batch of ``batch_size`` plain text messages in one committed call. Unit: messages."""
    from murmur_conversations import services

    size = sizes.batch_size
    ours_conv = _new_conversation("bench batch (ours)")

    def ours() -> None:
        services.save_messages(conversation=ours_conv, messages=list(workload.messages(size)))

    off_conv = _new_conversation("bench batch (redaction off)")

    def ours_off() -> None:
        services.save_messages(conversation=off_conv, messages=list(workload.messages(size)))

    variants = [
        Variant("ours save_messages", ours, sizes.batch_ops, size),
        Variant(REDACTION_OFF, _redaction_off(ours_off), sizes.batch_ops, size),
        _without_index(track, "ours save_messages", _batch(size), sizes.batch_ops, size),
    ]
    if isinstance(track.raw, psycopg.Connection):
        many = floors.pg_append_batch_executemany(track.raw, _new_conversation("bench batch (em)"))
        copy = floors.pg_append_batch_copy(track.raw, _new_conversation("bench batch (copy)"))
        variants += [
            Variant("raw executemany", lambda: many(workload.texts(size)), sizes.batch_ops, size),
            Variant("raw COPY", lambda: copy(workload.texts(size)), sizes.batch_ops, size),
        ]
    else:
        sqlite_many = floors.sqlite_append_batch(track.raw, _new_conversation("bench batch (em)"))
        variants.append(
            Variant(
                "raw executemany",
                lambda: sqlite_many(workload.texts(size)),
                sizes.batch_ops,
                size,
            )
        )
    ratios = [
        RatioSpec(
            "ours throughput / executemany",
            "ours save_messages",
            "raw executemany",
            "mean",
            "throughput",
            Target(">=", 0.8),
        ),
        RatioSpec("ours throughput / COPY", "ours save_messages", "raw COPY", "mean", "throughput"),
        RatioSpec(
            "redaction on / off mean",
            "ours save_messages",
            REDACTION_OFF,
            "mean",
            "time",
            Target("<=", 1.2),
        ),
        RatioSpec(
            f"ours throughput / {NO_INDEX}",
            "ours save_messages",
            f"ours save_messages, {NO_INDEX}",
            "mean",
            "throughput",
            Target(">=", 0.9),
        ),
    ]
    if track.langchain is not None:
        history = peers.langchain_history(track.langchain)
        variants.append(
            Variant(
                "langchain add_messages",
                lambda: history.add_messages(workload.texts(size)),
                sizes.batch_ops,
                size,
            )
        )
        ratios += [
            RatioSpec(
                "langchain throughput / executemany",
                "langchain add_messages",
                "raw executemany",
                "mean",
                "throughput",
            ),
            RatioSpec(
                "ours throughput / langchain",
                "ours save_messages",
                "langchain add_messages",
                "mean",
                "throughput",
            ),
        ]
    return Benchmark(
        name=f"{track.name}: append {size}",
        description=f"a batch of {size} plain text messages in one committed call (import path)",
        unit="msg",
        variants=variants,
        ratios=ratios,
    )


# --------------------------------------------------------------------------- page


def _ours_page(conversation_id: uuid.UUID, size: int, *, offset: bool) -> Any:
    """Our page: the keyset read the REST route makes (``reading.display_page``: one fixed
    statement on a raw cursor, rows straight into the display dicts); with ``offset``, the ORM's
    OFFSET over model instances."""
    from murmur_conversations.models import DisplayMessage
    from murmur_conversations.reading import display_page
    from murmur_conversations.representations import display_row

    def page(depth: int, before_seq: int) -> list[dict[str, Any]]:
        if offset:
            rows = DisplayMessage.objects.filter(conversation_id=conversation_id).order_by("-seq")
            return [display_row(row) for row in rows[depth : depth + size]]
        return display_page(conversation_id, limit=size, before_seq=before_seq)

    return page


#: The page read the REST route made before ``reading`` (``values_list`` keyset through the ORM):
#: kept beside ``ours keyset @0`` so one run shows what the fixed statement saves.
ORM_VALUES = "ORM values_list keyset @0"


def _orm_values_page(conversation_id: uuid.UUID, size: int) -> Callable[[int], object]:
    """The previous page read: Django ``values_list(*DISPLAY_COLUMNS)`` keyset, compiled on every
    call, rows into ``representations.display_row_of_values``."""
    from murmur_conversations.models import DisplayMessage
    from murmur_conversations.representations import DISPLAY_COLUMNS, display_row_of_values

    def page(before_seq: int) -> list[dict[str, Any]]:
        rows = DisplayMessage.objects.filter(conversation_id=conversation_id, seq__lt=before_seq)
        chosen = rows.order_by("-seq").values_list(*DISPLAY_COLUMNS)[:size]
        return [display_row_of_values(values) for values in chosen]

    return page


def _label(depth: int) -> str:
    return f"{depth // 1_000_000}M" if depth >= 1_000_000 else f"{depth // 1000}k" if depth else "0"


def page(track: Track, sizes: Sizes) -> Benchmark:
    """A newest-first page of ``page_size`` display rows at several depths (rows newer than the
    page) of one long conversation, as JSON-ready dicts. Unit: pages."""
    size, deepest = sizes.page_size, max(sizes.depths)
    conversation = _new_conversation("bench page")
    last_seq = deepest + size
    workload.fill_display_rows(track.alias, conversation, last_seq)
    keyset = _ours_page(conversation, size, offset=False)
    offset = _ours_page(conversation, size, offset=True)
    if isinstance(track.raw, psycopg.Connection):
        raw = floors.pg_page_keyset(track.raw, conversation, size)
    else:
        raw = floors.sqlite_page_keyset(track.raw, conversation, size)
    variants: list[Variant] = []
    ratios: list[RatioSpec] = []
    if track.is_postgres:
        cursor0 = last_seq + 1
        variants.append(_server_side_binding(lambda: keyset(0, cursor0), sizes.page_ops, " @0"))
    orm_values = _orm_values_page(conversation, size)
    variants.append(Variant(ORM_VALUES, partial(orm_values, last_seq + 1), sizes.page_ops))
    ratios.append(
        RatioSpec(f"{ORM_VALUES} / raw keyset @0", ORM_VALUES, "raw keyset @0", "p50", "time")
    )
    for depth in sizes.depths:
        label, cursor = _label(depth), last_seq - depth + 1
        slow_ops = max(1, sizes.page_ops // 20) if depth >= 100_000 else sizes.page_ops
        variants += [
            Variant(f"ours keyset @{label}", partial(keyset, depth, cursor), sizes.page_ops),
            Variant(f"raw keyset @{label}", partial(raw, cursor), sizes.page_ops),
            Variant(f"ORM OFFSET @{label}", partial(offset, depth, cursor), slow_ops),
        ]
        ratios += [
            RatioSpec(
                f"ours / raw keyset @{label}",
                f"ours keyset @{label}",
                f"raw keyset @{label}",
                "p50",
                "time",
                Target("<=", 1.5),
            ),
            RatioSpec(
                f"ours speed / OFFSET @{label}",
                f"ours keyset @{label}",
                f"ORM OFFSET @{label}",
                "p50",
                "throughput",
                Target(">=", 100) if depth >= 1_000_000 else None,
            ),
        ]
        if track.langchain is not None and depth <= 10_000:
            history = peers.langchain_history(track.langchain)
            history.add_messages(workload.texts(depth + size))
            variants.append(
                Variant(
                    f"langchain get_messages @{label}",
                    history.get_messages,
                    max(1, sizes.page_ops // 10) if depth else sizes.page_ops,
                )
            )
            ratios.append(
                RatioSpec(
                    f"langchain (whole history) / ours @{label}",
                    f"langchain get_messages @{label}",
                    f"ours keyset @{label}",
                    "p50",
                    "time",
                )
            )
    ratios.append(
        RatioSpec(
            f"{PROTO_SSB} @0 / raw keyset @0", f"{PROTO_SSB} @0", "raw keyset @0", "p50", "time"
        )
    )
    if deepest:
        ratios.append(
            RatioSpec(
                f"ours @{_label(deepest)} / ours @0",
                f"ours keyset @{_label(deepest)}",
                "ours keyset @0",
                "p50",
                "time",
                Target("<=", 1.2) if deepest >= 1_000_000 else None,
            )
        )
    return Benchmark(
        name=f"{track.name}: page of {size}",
        description=(
            f"newest-first page of {size} display rows at depth {', '.join(map(_label, sizes.depths))} "
            f"of a {last_seq}-row conversation, as JSON-ready dicts"
        ),
        unit="page",
        variants=variants,
        ratios=ratios,
    )
