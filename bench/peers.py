"""Peer libraries measured beside ours, each used the way its documentation shows.

langchain-postgres ``PostgresChatMessageHistory``: one table ``(id serial, session_id uuid,
message jsonb, created_at)``, one row per message, ``add_messages`` is ``executemany`` + commit,
``get_messages`` reads the whole session (it has no page). langchain-community
``SQLChatMessageHistory`` on SQLite: one table ``(id, session_id, message)`` in the bench's own
SQLite file, ``add_message`` is one SQLAlchemy session add + commit. Missing peers are reported,
not faked.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import psycopg

LANGCHAIN_TABLE = "bench_langchain_history"


def peer_versions() -> dict[str, str | None]:
    """Installed versions of the peer packages (None when missing)."""
    versions: dict[str, str | None] = {}
    for name in ("langchain-postgres", "langchain-community", "langchain-core", "orjson"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


@dataclass
class LangchainHistory:
    """One langchain-postgres chat history (a session) on its own psycopg connection."""

    history: Any
    message_class: Any

    def add_message(self, value: str) -> None:
        """``add_message``: one row, committed."""
        self.history.add_message(self.message_class(content=value))

    def add_messages(self, values: list[str]) -> None:
        """``add_messages``: ``executemany`` of one row per message, committed."""
        self.history.add_messages([self.message_class(content=v) for v in values])

    def get_messages(self) -> list[Any]:
        """``get_messages``: the whole session as LangChain message objects, oldest first."""
        return list(self.history.get_messages())


def langchain_available() -> str | None:
    """None when langchain-postgres imports, else why not (shown in the table and JSON)."""
    try:
        import langchain_postgres  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError as error:
        return (
            f"langchain-postgres is not installed ({error}); pip install -r bench/requirements.txt"
        )
    return None


def create_langchain_table(conn: psycopg.Connection[Any]) -> None:
    """Create langchain-postgres' table and index with its own ``create_tables``."""
    from langchain_postgres import PostgresChatMessageHistory  # type: ignore[import-not-found,unused-ignore]

    PostgresChatMessageHistory.create_tables(conn, LANGCHAIN_TABLE)


def langchain_history(conn: psycopg.Connection[Any]) -> LangchainHistory:
    """A new langchain-postgres session on ``conn``."""
    from langchain_core.messages import HumanMessage  # type: ignore[import-not-found,unused-ignore]
    from langchain_postgres import PostgresChatMessageHistory  # type: ignore[import-not-found,unused-ignore]

    history = PostgresChatMessageHistory(LANGCHAIN_TABLE, str(uuid.uuid4()), sync_connection=conn)
    return LangchainHistory(history, HumanMessage)


#: The table of langchain-community's SQLite history (in the bench's SQLite file).
LANGCHAIN_SQLITE_TABLE = "bench_langchain_sqlite_history"
#: The SQLite variant's name in the ``append 1`` benchmark.
LANGCHAIN_SQLITE = "langchain-community SQLChatMessageHistory"


def langchain_community_available() -> str | None:
    """None when langchain-community's ``SQLChatMessageHistory`` imports, else why not (shown as
    a note: the SQLite ``append 1`` variant is skipped)."""
    try:
        from langchain_community.chat_message_histories import (  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
            SQLChatMessageHistory,
        )
    except ImportError as error:
        return (
            f"langchain-community is not installed ({error}): sqlite append 1 variant "
            f"'{LANGCHAIN_SQLITE}' skipped; pip install -r bench/requirements.txt"
        )
    return None


def langchain_sqlite_history(path: str) -> LangchainHistory:
    """A new langchain-community ``SQLChatMessageHistory`` session on the SQLite file ``path``
    (the file the SQLite track's Django alias uses), through a SQLAlchemy engine given as its
    ``connection`` (a form its documentation shows) whose connections set the pragmas of the
    track's own (``synchronous=NORMAL`` in WAL, a 20 s busy timeout): the comparison is of the
    libraries, not of the fsync policy. The table is created by the history on first use."""
    import warnings

    from langchain_core.messages import HumanMessage  # type: ignore[import-not-found,unused-ignore]
    from sqlalchemy import create_engine, event  # type: ignore[import-not-found,unused-ignore]

    with warnings.catch_warnings():  # its sunset notice
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.chat_message_histories import (  # type: ignore[import-not-found,unused-ignore]
            SQLChatMessageHistory,
        )

    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 20})

    @event.listens_for(engine, "connect")  # type: ignore[misc,untyped-decorator,unused-ignore]
    def pragmas(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    history = SQLChatMessageHistory(
        str(uuid.uuid4()), table_name=LANGCHAIN_SQLITE_TABLE, connection=engine
    )
    return LangchainHistory(history, HumanMessage)
