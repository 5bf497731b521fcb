"""A logging filter that keeps secrets out of access logs (docs/security.md "Redaction").

A server's access log prints each request's path with its query string, so ``GET
/api/search/?q=<a key>`` or ``?tag=``/``?since=`` holding one would be written verbatim. Add
:class:`RedactQueryStrings` to the handlers (or loggers) of ``uvicorn.access``, ``django.server``
and ``django.channels.server`` (Daphne under ``runserver``)::

    LOGGING = {
        "version": 1,
        "filters": {"redact": {"()": "murmur_conversations.logfilters.RedactQueryStrings"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
        ...
    }
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final
from urllib.parse import quote, unquote_plus

from murmur_conversations.redaction import redact

__all__ = ["RedactQueryStrings", "redact_query_strings"]

#: A query string: from ``?`` to the next blank, quote or end.
_QUERY: Final = re.compile(r"\?([^\s\"'<>]*)")


def redact_query_strings(text: str) -> str:
    """``text`` with each query string's values redacted: every ``name=value`` pair is decoded
    (``%xx`` and ``+``), redacted (``redaction.redact``) and, when a secret was found, written back
    percent-encoded with its marker; everything else is kept as it is."""
    if "?" not in text:
        return text
    return _QUERY.sub(_redacted_query, text)


def _redacted_query(match: re.Match[str]) -> str:
    pairs = []
    for pair in match.group(1).split("&"):
        name, equals, value = pair.partition("=")
        redacted = redact(unquote_plus(value)) if equals else None
        if redacted is not None and redacted.counts:
            pair = f"{name}={quote(redacted.value, safe='[]:')}"
        else:
            found = redact(unquote_plus(name))
            if found.counts:  # a secret given as a parameter's name
                pair = quote(found.value, safe="[]:") + equals + value
        pairs.append(pair)
    return "?" + "&".join(pairs)


def _masked(value: Any) -> Any:
    return redact_query_strings(value) if isinstance(value, str) else value


class RedactQueryStrings(logging.Filter):
    """Redact the query strings of a log record's message and arguments in place (a tuple of
    arguments, as ``uvicorn.access`` and ``django.server`` log, or a mapping, as Daphne's
    ``runserver`` logs); the record is always kept. Arguments keep their positions and types, so
    formatters that read them (uvicorn's ``AccessFormatter``) still work."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _masked(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _masked(arg) for key, arg in record.args.items()}
        return True
