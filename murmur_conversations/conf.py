"""The app's settings: ``settings.MURMUR_CONVERSATIONS`` over documented defaults, read on access.

Nothing here is read at import time, so ``override_settings`` works in tests and a misconfiguration
is reported by ``manage.py check`` (see ``checks.py``), not by the first request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from django.conf import settings as django_settings

if TYPE_CHECKING:
    from murmur_conversations.prices import PriceBook

SETTING_NAME: Final = "MURMUR_CONVERSATIONS"

#: Every key with its default. The README's settings table lists the type and check id of each.
DEFAULTS: Final[dict[str, Any]] = {
    # REST pages: the default and the largest `limit` (docs/api.md).
    "PAGE_SIZE": 50,
    "MAX_PAGE_SIZE": 100,
    # Read grants for plug-ins, default-deny (docs/hooks.md).
    "HOOKS": {},
    # Dotted path of the function that scopes conversations to a user (selectors.owner_scope).
    "SCOPE": "murmur_conversations.selectors.owner_scope",
    # Largest message content and metadata, in UTF-8 bytes of compact JSON.
    "MAX_CONTENT_BYTES": 8 * 1024 * 1024,
    "MAX_METADATA_BYTES": 64 * 1024,
    # Prefix of every Channels group name this app uses.
    "GROUP_PREFIX": "murmur",
    # Seconds between database reads of a websocket consumer on a process-local channel layer.
    "DB_TAIL_INTERVAL": 0.25,
    # Write each event's live frames to the frame log in its transaction, so that processes on a
    # process-local layer deliver other processes' writes exactly (docs/websocket.md "The frame log").
    "FRAME_LOG": True,
    # Seconds a frame-log row is kept before it is pruned.
    "FRAME_LOG_RETENTION": 60,
    # Prepare the write path's fixed statements on the PostgreSQL server at their first use on a
    # connection; False behind a transaction-mode PgBouncer (docs/write-path.md "Prepared statements").
    "PREPARE_STATEMENTS": True,
    # Tool names whose arguments a share link never shows ("*": every tool) (docs/api.md).
    "PRIVATE_TOOLS": [],
    # The address a new share link answers with: a template with "{token}" (e.g. the host's page
    # "https://chat.example.com/shared/{token}/"), or None for the API's GET shared/<token>/.
    "SHARE_URL": None,
    # Redaction at write time (docs/write-path.md "Redaction"); keys: redaction.REDACT_DEFAULTS.
    "REDACT": {},
    # Days after the last write when purge_conversations erases a conversation (None: never).
    "RETENTION_DAYS": None,
    # Prices in USD per million tokens, by model, over the genai-prices package's data (docs/usage.md).
    "PRICES": {},
    # The Django cache holding websocket tickets; shared by every process (docs/deployment.md).
    "TICKET_CACHE": "default",
    # Seconds between re-checks of every open socket's access (docs/security.md); at most 4.
    "ACCESS_RECHECK_INTERVAL": 2.0,
}

#: MAX_PAGE_SIZE may be lowered, never raised above this.
MAX_PAGE_SIZE_CEILING: Final = 100


class AppSettings:
    """Attribute access to ``MURMUR_CONVERSATIONS`` keys, falling back to :data:`DEFAULTS`.

    ``app_settings.PAGE_SIZE`` reads the Django setting on every access. Unknown attribute
    names raise ``AttributeError``. Values are returned as configured; ``checks.py`` validates them.
    """

    @property
    def user_settings(self) -> dict[str, Any]:
        value = getattr(django_settings, SETTING_NAME, {})
        return value if isinstance(value, dict) else {}

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"{SETTING_NAME} has no key {name!r}")
        return self.user_settings.get(name, DEFAULTS[name])

    # Typed accessors for the keys the core uses; same values as attribute access.
    @property
    def page_size(self) -> int:
        return int(self.PAGE_SIZE)

    @property
    def max_page_size(self) -> int:
        return min(int(self.MAX_PAGE_SIZE), MAX_PAGE_SIZE_CEILING)

    @property
    def max_content_bytes(self) -> int:
        return int(self.MAX_CONTENT_BYTES)

    @property
    def max_metadata_bytes(self) -> int:
        return int(self.MAX_METADATA_BYTES)

    @property
    def group_prefix(self) -> str:
        return str(self.GROUP_PREFIX)

    @property
    def db_tail_interval(self) -> float:
        return float(self.DB_TAIL_INTERVAL)

    @property
    def frame_log(self) -> bool:
        return bool(self.FRAME_LOG)

    @property
    def frame_log_retention(self) -> float:
        return float(self.FRAME_LOG_RETENTION)

    @property
    def prepare_statements(self) -> bool:
        return bool(self.PREPARE_STATEMENTS)

    @property
    def ticket_cache(self) -> str:
        return str(self.TICKET_CACHE)

    @property
    def access_recheck_interval(self) -> float:
        """Seconds between access re-checks of open sockets, within 0.01..4 so that a socket
        closes within 5 seconds of losing access (docs/security.md)."""
        return min(max(float(self.ACCESS_RECHECK_INTERVAL), 0.01), 4.0)

    @property
    def private_tools(self) -> frozenset[str]:
        value = self.PRIVATE_TOOLS
        return (
            frozenset(v for v in value if isinstance(v, str))
            if isinstance(value, list | tuple)
            else frozenset()
        )

    @property
    def share_url(self) -> str | None:
        value = self.SHARE_URL
        return value if isinstance(value, str) and "{token}" in value else None

    @property
    def retention_days(self) -> int | None:
        value = self.RETENTION_DAYS
        return None if value is None else int(value)

    @property
    def prices(self) -> PriceBook:
        """The prices: ``PRICES`` over the ``genai-prices`` package's data (``prices.PriceBook``)."""
        from murmur_conversations.prices import PriceBook

        return PriceBook(self.PRICES)

    @property
    def hooks(self) -> dict[str, Any]:
        value = self.HOOKS
        return value if isinstance(value, dict) else {}


app_settings = AppSettings()
