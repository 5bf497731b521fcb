"""Keyset pages (docs/api.md "Pages"): the ``limit`` rule and signed, bound cursors.

A cursor is ``django.core.signing`` text over ``{listing, scope, params, key}``: the listing name
(``conversations``, ``display``, ``since``, ``record``, ``tool-calls``, ``transcript``,
``export``), the conversation id (the caller's id for the conversation list), the parameters the
listing was read with (``since``, ``status``, ``format``) and the keyset position of the last row
served. Keysets use columns that are unique and never change (``position``, ``seq``,
``(event_seq, seq)``, ``id``), so a walk returns every row once while rows are appended. Anything
else given as a cursor is ``InvalidCursor`` (400 ``invalid_cursor``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from django.core import signing
from django.http import QueryDict

from murmur_conversations.api.exceptions import InvalidCursor
from murmur_conversations.conf import app_settings

_INTEGER: Final = re.compile(r"-?[0-9]+")
_SALT: Final = "murmur_conversations.api.cursor"
_MAX_CURSOR_LENGTH: Final = 2048
TRANSCRIPT_LIMIT: Final = 1000

Row = TypeVar("Row")


def clamp_limit(raw: str | None, *, default: int, maximum: int) -> int:
    """The ``limit`` rule: missing or not an integer -> ``default``; below 1 -> 1; above
    ``maximum`` -> ``maximum``."""
    fallback = min(max(default, 1), maximum)
    if raw is None or not _INTEGER.fullmatch(raw):
        return fallback
    if len(raw.lstrip("-")) > 20:  # beyond any page size; avoids int() of huge strings
        return 1 if raw.startswith("-") else maximum
    return min(max(int(raw), 1), maximum)


def page_limit(query: QueryDict) -> int:
    """``limit`` of a page: default ``PAGE_SIZE``, at most ``MAX_PAGE_SIZE`` (read per request)."""
    maximum = app_settings.max_page_size
    return clamp_limit(query.get("limit"), default=app_settings.page_size, maximum=maximum)


def transcript_limit(query: QueryDict) -> int:
    """``limit`` of a transcript page: default and maximum 1,000."""
    return clamp_limit(query.get("limit"), default=TRANSCRIPT_LIMIT, maximum=TRANSCRIPT_LIMIT)


@dataclass(frozen=True)
class CursorBinding:
    """What a cursor is valid for: the listing, the conversation (or caller) and the parameters."""

    listing: str
    scope: str
    params: tuple[tuple[str, str], ...] = ()

    def sign(self, key: list[Any]) -> str:
        """A signed cursor that resumes this listing after ``key`` (a JSON list)."""
        payload = {
            "l": self.listing,
            "s": self.scope,
            "p": [list(p) for p in self.params],
            "k": key,
        }
        return signing.dumps(payload, salt=_SALT, compress=False)

    def read(self, cursor: str | None) -> list[Any] | None:
        """The keyset of ``cursor``; None for no cursor or an empty one (``?cursor=``: the first
        page, as in stock DRF). ``InvalidCursor`` for a forged, malformed or foreign cursor
        (another listing, conversation or parameter set)."""
        if not cursor:
            return None
        if len(cursor) > _MAX_CURSOR_LENGTH:
            raise InvalidCursor("cursor is not valid for this listing; start again without it")
        try:
            payload = signing.loads(cursor, salt=_SALT)
        except (signing.BadSignature, ValueError, UnicodeError):
            raise InvalidCursor(
                "cursor is not valid for this listing; start again without it"
            ) from None
        if (
            not isinstance(payload, dict)
            or payload.get("l") != self.listing
            or payload.get("s") != self.scope
            or payload.get("p") != [list(p) for p in self.params]
            or not isinstance(payload.get("k"), list)
        ):
            raise InvalidCursor("cursor belongs to another listing, conversation or filter")
        key: list[Any] = payload["k"]
        return key


@dataclass(frozen=True)
class Page(Generic[Row]):
    """One page: the rows served and the cursor of the next page (None when no row followed)."""

    rows: Sequence[Row]
    next_cursor: str | None


def keyset_page(
    rows: Sequence[Row], *, limit: int, binding: CursorBinding, key_of: Callable[[Row], list[Any]]
) -> Page[Row]:
    """Cut ``rows`` (fetched with ``limit + 1``) to a page; the extra row only says that a next
    page exists, and the cursor resumes after the last row served."""
    served = list(rows[:limit])
    more = len(rows) > limit
    return Page(rows=served, next_cursor=binding.sign(key_of(served[-1])) if more else None)


def body(results: list[dict[str, Any]], page: Page[Any], total: int) -> dict[str, Any]:
    """The page body ``{"results", "next_cursor", "total"}``."""
    return {"results": results, "next_cursor": page.next_cursor, "total": total}
