"""The MCP server of one process (docs/mcp.md): the SDK's low-level ``Server`` answering
``tools/list`` with :func:`tools.tool_specs` and ``tools/call`` with :func:`tools.run_tool` for
the user a transport names, and the stdio transport that ``manage.py mcp_server`` runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import mcp_types as types
from channels.db import database_sync_to_async
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

import murmur_conversations
from murmur_conversations.mcp.tools import ToolRefused, run_tool, tool_specs
from murmur_conversations.outage import retry_once, unavailable

#: The server's name in the ``initialize`` answer.
SERVER_NAME: Final = "murmur-conversations"
#: What a tool answers when the database cannot be reached (an outage, docs/deployment.md).
UNAVAILABLE: Final = "the conversation store is unavailable right now; try again shortly"
INSTRUCTIONS: Final = (
    "Search, list and read the past conversations of the user this server acts for. "
    "search_conversations finds messages; list_conversations lists conversations as the "
    "user's sidebar does; read_transcript reads one conversation page by page. Every read is "
    "written to the user's access log."
)

#: Who a request acts for: the transport's user (stdio: the operator's ``--owner``; HTTP: the
#: token's), or None when the request carries none.
UserOf = Callable[[ServerRequestContext[Any]], Any]


def _answer(body: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=body)


def _refusal(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def build_server(user_of: UserOf) -> Server[Any]:
    """A low-level MCP ``Server`` with the three tools, each call run for ``user_of(ctx)`` on a
    database thread (``channels.db.database_sync_to_async``, which closes stale connections),
    once more on a fresh connection after an outage (``outage.retry_once``).
    ``tools/list`` lists the same tools for everyone and touches no database, so it answers
    during an outage too. A tool's error (bad
    arguments, a conversation the user may not read, an unwritable access log, an outage) is
    an ``isError`` result with a message; an unknown tool name is the JSON-RPC error
    ``INVALID_PARAMS``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=name,
                    description=description,
                    input_schema=schema,
                    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
                )
                for name, (description, schema) in tool_specs().items()
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        user = user_of(ctx)
        if user is None:  # a transport that let an anonymous request through
            return _refusal("not authenticated")
        arguments = params.arguments or {}
        try:
            body = await database_sync_to_async(retry_once)(
                lambda: run_tool(user, params.name, arguments)
            )
        except KeyError:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name!r}; the tools are {', '.join(tool_specs())}",
            ) from None
        except ToolRefused as error:
            return _refusal(str(error))
        except Exception as error:
            if not unavailable(error):
                raise
            return _refusal(UNAVAILABLE)
        return _answer(body)

    return Server(
        SERVER_NAME,
        version=murmur_conversations.__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(user: Any) -> None:
    """Serve MCP on this process's stdin and stdout for ``user`` (every request acts for them)
    until the client closes stdin. What else the process prints goes to stderr meanwhile (the
    SDK diverts stdout), so the wire stays clean."""
    server = build_server(lambda ctx: user)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
