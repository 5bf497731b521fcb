"""The demo mounts the MCP server at ``/mcp`` of its ASGI application (project/asgi.py,
docs/mcp.md "Over HTTP"): the token ``POST /api/token/`` gives reaches the tools there, Django
still answers every other path, and ``/mcp`` without a token is 401."""

from __future__ import annotations

import httpx2
import pytest
from django.contrib.auth.models import User
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from murmur_conversations.models import Conversation
from project.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_token_from_the_api_reads_through_the_mounted_mcp_server(
    user: User, conversation: Conversation
) -> None:
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=application), base_url="http://localhost"
    ) as http:
        refused = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert refused.status_code == 401
        got = await http.post("/api/token/", json={"username": user.username, "password": "pw"})
        assert got.status_code == 200
        http.headers["Authorization"] = f"Token {got.json()['token']}"
        async with Client(streamable_http_client("http://localhost/mcp", http_client=http)) as mcp:
            listed = await mcp.call_tool("list_conversations", {})
        assert not listed.is_error
        assert [row["id"] for row in listed.structured_content["results"]] == [str(conversation.pk)]
