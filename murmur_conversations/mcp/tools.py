"""The MCP server's tools (docs/mcp.md "Tools"): three reads of one user's conversations, each
the page the REST API gives for the same request (``api.search.search_page``,
``api.viewsets.conversation_page``, ``api.viewsets.transcript_page``: the same selectors, owner
scope, rows and cursors), each written to the access log as an agent read before it is answered
(``services.log_agent_reads``, surfaces ``mcp-*``). Plain synchronous functions of the user and
the tool's arguments; ``mcp.server`` runs them on a database thread."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from rest_framework.exceptions import APIException

from murmur_conversations import services
from murmur_conversations.api.pagination import TRANSCRIPT_LIMIT, clamp_limit
from murmur_conversations.api.search import search_page
from murmur_conversations.api.viewsets import (
    conversation_page,
    transcript_after,
    transcript_page,
)
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import InvalidSearch, WriteConflict
from murmur_conversations.models import AccessSurface
from murmur_conversations.search import MAX_QUERY_CHARS, parse_query
from murmur_conversations.selectors import conversation_for

#: What ``read_transcript`` answers for an id the user may not read: foreign, missing and
#: malformed ids alike, so an agent learns nothing about other users' conversations.
NOT_FOUND: Final = (
    "no such conversation: use an id that search_conversations or list_conversations gave"
)
#: What a tool answers when its read could not be written to the access log.
UNLOGGED: Final = "the access log could not be written (the database is busy); try again"
#: Messages per ``read_transcript`` page unless ``limit`` says otherwise.
TRANSCRIPT_PAGE: Final = 100


class ToolRefused(Exception):
    """A tool call that is answered with an error result (``isError``) and this message, which
    says how to fix the call; nothing was read."""


def _cursor(listing: str) -> dict[str, Any]:
    return {
        "type": ["string", "null"],
        "description": f"next_cursor of the previous page of this {listing}; omit for the first",
    }


def _limit(what: str, default: int, maximum: int) -> dict[str, Any]:
    return {
        "type": ["integer", "null"],
        "description": f"{what} per page: default {default}, at most {maximum} (more is cut)",
    }


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def tool_specs() -> dict[str, tuple[str, dict[str, Any]]]:
    """``{name: (description, JSON Schema of the arguments)}`` of the three tools, with the page
    sizes of the settings in force (``PAGE_SIZE``, ``MAX_PAGE_SIZE``, read on every call)."""
    page, most = app_settings.page_size, app_settings.max_page_size
    return {
        "search_conversations": (
            "Full-text search over the messages of your conversations (subagents' included), "
            "best match first. Each hit names its conversation_id and title, the row's seq and "
            "role, and a snippet with highlights ([start, end) offsets into it). Query "
            'language: stemmed words (all must match), "quoted phrases", -excluded, a or b.',
            _schema(
                {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_QUERY_CHARS,
                        "description": "the words to find",
                    },
                    "cursor": _cursor("search"),
                    "limit": _limit("hits", page, most),
                },
                required=("query",),
            ),
        ),
        "list_conversations": (
            "Your conversations as your sidebar lists them: pinned first, then most recently "
            "saved; archived ones and subagents' left out. Each row has the id, title, "
            "saved_at, status, message_count, tags and token usage. With query, only those whose "
            "title or a message matches it.",
            _schema(
                {
                    "query": {
                        "type": ["string", "null"],
                        "maxLength": MAX_QUERY_CHARS,
                        "description": "only conversations matching these words (as search)",
                    },
                    "cursor": _cursor("list"),
                    "limit": _limit("conversations", page, most),
                }
            ),
        ),
        "read_transcript": (
            "One page of a conversation's transcript, oldest first: the user's and the "
            "assistant's messages as {role, content} text (tool calls and results left out). "
            "Follow next_cursor for the next page; null means the end.",
            _schema(
                {
                    "conversation_id": {
                        "type": "string",
                        "description": "the conversation's id, from search or list",
                    },
                    "cursor": _cursor("transcript"),
                    "limit": _limit("messages", TRANSCRIPT_PAGE, TRANSCRIPT_LIMIT),
                },
                required=("conversation_id",),
            ),
        ),
    }


def run_tool(user: Any, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The answer of tool ``name`` (one of :func:`tool_specs`) for ``user``: the page as a JSON
    object. Raises ``ToolRefused`` for arguments it cannot read (unknown, of the wrong type, a
    cursor of another listing, user or query, an unreadable query), an id ``user`` may not read
    (:data:`NOT_FOUND`) and a read the access log could not record (:data:`UNLOGGED`);
    ``KeyError`` for an unknown tool name."""
    tool = _TOOLS[name]
    allowed = tool_specs()[name][1]["properties"]
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        raise ToolRefused(
            f"unknown argument {unknown[0]!r}; {name} takes {', '.join(sorted(allowed))}"
        )
    try:
        return tool(user, arguments)
    except APIException as error:  # InvalidCursor: the REST API's own words
        raise ToolRefused(str(error.detail)) from None
    except InvalidSearch as error:
        raise ToolRefused(str(error).replace("q ", "query ", 1)) from None
    except WriteConflict:
        raise ToolRefused(UNLOGGED) from None


def _string(arguments: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = arguments.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ToolRefused(f"{name} must be a string")
    return value


def _page_limit(arguments: Mapping[str, Any], *, default: int, maximum: int) -> int:
    """``limit`` by the REST API's limit rule (``api.pagination.clamp_limit``)."""
    value = arguments.get("limit")
    if value is None:
        return clamp_limit(None, default=default, maximum=maximum)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolRefused("limit must be an integer")
    return clamp_limit(str(value), default=default, maximum=maximum)


def _logged(user: Any, pks: list[uuid.UUID], surface: str) -> int:
    """Write the agent reads of ``pks``; the number of entries written."""
    return len(services.log_agent_reads(conversations=pks, actor=user, surface=surface))


def search_conversations(user: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``GET search/``'s page: ``{"results": [<hit>], "next_cursor"}``; one ``mcp-search``
    entry per conversation with a hit on the page."""
    query = parse_query(_string(arguments, "query", required=True))
    page = search_page(
        user,
        query,
        cursor=_string(arguments, "cursor"),
        limit=_page_limit(
            arguments, default=app_settings.page_size, maximum=app_settings.max_page_size
        ),
    )
    pks = [uuid.UUID(hit["conversation_id"]) for hit in page["results"]]
    _logged(user, pks, AccessSurface.MCP_SEARCH)
    return page


def list_conversations(user: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``GET conversations/``'s page (not archived, top level): ``{"results": [<summary row>],
    "next_cursor", "total"}``; one ``mcp-list`` entry per conversation on the page."""
    raw = _string(arguments, "query")
    page = conversation_page(
        user,
        parent=None,
        archived="0",
        tag=None,
        query=parse_query(raw) if raw else None,
        cursor=_string(arguments, "cursor"),
        limit=_page_limit(
            arguments, default=app_settings.page_size, maximum=app_settings.max_page_size
        ),
    )
    _logged(user, [uuid.UUID(row["id"]) for row in page["results"]], AccessSurface.MCP_LIST)
    return page


def read_transcript(user: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``GET conversations/{id}/transcript/``'s page: ``{"conversation_id", "messages",
    "next_cursor"}``; one ``mcp-transcript`` entry, written before the page is read."""
    conversation = conversation_for(user, _string(arguments, "conversation_id", required=True))
    if conversation is None:
        raise ToolRefused(NOT_FOUND)
    after = transcript_after(conversation, _string(arguments, "cursor"))
    limit = _page_limit(arguments, default=TRANSCRIPT_PAGE, maximum=TRANSCRIPT_LIMIT)
    if not _logged(user, [conversation.pk], AccessSurface.MCP_TRANSCRIPT):
        raise ToolRefused(NOT_FOUND)  # deleted since it was looked up
    return transcript_page(conversation, after=after, limit=limit)


_TOOLS: Final[dict[str, Callable[[Any, Mapping[str, Any]], dict[str, Any]]]] = {
    "search_conversations": search_conversations,
    "list_conversations": list_conversations,
    "read_transcript": read_transcript,
}
