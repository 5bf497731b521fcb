"""The MCP server (docs/mcp.md), driven by the SDK's own client over stdio (``manage.py
mcp_server`` as a subprocess on the test database) and over streamable HTTP (the ASGI app
in-process): it searches, lists and reads the owner's conversations with the REST API's pages,
answers only redacted stored text, is refused outside its grant (another owner's conversation is
as absent as a random id; no token or a bad one is 401) and writes each read to the owner's
access log as an agent read."""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any, NoReturn

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import OperationalError
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import INVALID_PARAMS
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.exceptions import WriteConflict
from murmur_conversations.mcp import tools
from murmur_conversations.mcp.http import MCPApp
from murmur_conversations.mcp.server import UNAVAILABLE
from murmur_conversations.mcp.tools import NOT_FOUND, UNLOGGED
from murmur_conversations.models import AccessLogEntry, Conversation
from tests.helpers import MakeUser
from tests.servers import ROOT, database_environment

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "gh" + "p_" + ("Qz7Lm2Xv9Kp4Rt8Wn3Hb6Jc1Fd5Gs0Ay" * 2)[:36]
TOOLS = {"search_conversations", "list_conversations", "read_transcript"}


@pytest.fixture
def alice(make_user: MakeUser) -> User:
    return make_user("alice")


@pytest.fixture
def mine(alice: User) -> Conversation:
    conversation = services.start_conversation(
        owner=alice, title=f"Fix the flaky tokenizer {SECRET}"
    )
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": f"the tokenizer test is flaky; my token is {SECRET}"},
            {"role": "assistant", "content": "The tokenizer drops tabs; I will fix it."},
            {"role": "user", "content": "thanks"},
        ],
    )
    return conversation


@pytest.fixture
def bob(make_user: MakeUser) -> User:
    return make_user("bob")


@pytest.fixture
def theirs(bob: User) -> Conversation:
    conversation = services.start_conversation(owner=bob, title="Bob's tokenizer")
    services.save_message(
        conversation=conversation, message={"role": "user", "content": "bob's tokenizer notes"}
    )
    return conversation


def body(result: Any) -> dict[str, Any]:
    """The JSON answer of a successful tool call (its text and its structured content agree)."""
    assert not result.is_error, result.content
    answer: dict[str, Any] = json.loads(result.content[0].text)
    assert answer == result.structured_content
    return answer


def refusal(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


async def entries(conversation: Conversation) -> list[tuple[str, str]]:
    def read() -> list[tuple[str, str]]:
        rows = AccessLogEntry.objects.filter(conversation=conversation).order_by("id")
        return [(row.actor_name, row.surface) for row in rows]

    return await sync_to_async(read)()


async def exercise(client: Client, mine: Conversation, theirs: Conversation) -> None:
    """Everything an agent does through either transport, and what the access log then says."""
    listed_tools = await client.list_tools()
    assert {tool.name for tool in listed_tools.tools} == TOOLS
    for tool in listed_tools.tools:
        assert tool.annotations is not None and tool.annotations.read_only_hint
        assert tool.input_schema["additionalProperties"] is False

    found = body(await client.call_tool("search_conversations", {"query": "tokenizer"}))
    assert {hit["conversation_id"] for hit in found["results"]} == {str(mine.pk)}
    title = "Fix the flaky tokenizer [REDACTED:github-token]"
    assert found["results"][0]["conversation_title"] == title

    listed = body(await client.call_tool("list_conversations", {}))
    assert [(row["id"], row["title"]) for row in listed["results"]] == [(str(mine.pk), title)]
    assert listed["total"] == 1

    first = body(
        await client.call_tool("read_transcript", {"conversation_id": str(mine.pk), "limit": 2})
    )
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    assert "[REDACTED:github-token]" in first["messages"][0]["content"]
    assert first["next_cursor"]
    rest = body(
        await client.call_tool(
            "read_transcript", {"conversation_id": str(mine.pk), "cursor": first["next_cursor"]}
        )
    )
    assert rest["messages"] == [{"role": "user", "content": "thanks"}]
    assert rest["next_cursor"] is None

    # Outside the grant: another owner's id is answered exactly as a random or malformed one.
    answers = {
        refusal(await client.call_tool("read_transcript", {"conversation_id": ident}))
        for ident in (str(theirs.pk), str(uuid.uuid4()), "not-an-id")
    }
    assert answers == {NOT_FOUND}

    for answer in (found, listed, first, rest):
        assert SECRET not in json.dumps(answer)
    assert await entries(mine) == [
        ("alice", "mcp-search"),
        ("alice", "mcp-list"),
        ("alice", "mcp-transcript"),
        ("alice", "mcp-transcript"),
    ]
    assert await entries(theirs) == []


@contextlib.asynccontextmanager
async def over_http(token: str | None) -> AsyncIterator[httpx2.AsyncClient]:
    headers = {} if token is None else {"Authorization": f"Token {token}"}
    transport = httpx2.ASGITransport(app=MCPApp())
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://testserver", headers=headers
    ) as http:
        yield http


async def test_over_stdio(alice: User, mine: Conversation, theirs: Conversation) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_server", "--owner", "alice"],
        env=database_environment(),
        cwd=ROOT,
    )
    async with Client(server) as client:
        await exercise(client, mine, theirs)


async def test_over_http(alice: User, mine: Conversation, theirs: Conversation) -> None:
    token = await sync_to_async(Token.objects.create)(user=alice)
    async with (
        over_http(token.key) as http,
        Client(streamable_http_client("http://testserver/mcp", http_client=http)) as client,
    ):
        await exercise(client, mine, theirs)


LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "list_conversations", "arguments": {}},
}


@pytest.mark.parametrize(
    "authorization", [None, "Token", "Token nope", "Bearer nope", "Basic YWxpY2U6cHc="]
)
async def test_http_without_a_valid_token_is_refused_and_runs_nothing(
    alice: User, mine: Conversation, authorization: str | None
) -> None:
    await sync_to_async(Token.objects.create)(user=alice)
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    async with over_http(None) as http:
        for message in (LIST_TOOLS, CALL):
            response = await http.post("/mcp", json=message, headers=headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == 'Token realm="mcp"'
            assert response.json()["error"] == "not_authenticated"
    assert await entries(mine) == []


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
async def test_http_answers_post_only(alice: User, mine: Conversation, method: str) -> None:
    """Stateless: a GET would open an event stream that nothing ever ends (and holds a worker),
    so every method but POST is 405, after the token check like everything else."""
    token = await sync_to_async(Token.objects.create)(user=alice)
    async with over_http(token.key) as http:
        response = await http.request(method, "/mcp", headers={"Accept": "text/event-stream"})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"] == "method_not_allowed"
    async with over_http(None) as http:
        assert (await http.request(method, "/mcp")).status_code == 401
    assert await entries(mine) == []


async def test_http_token_of_an_inactive_user_is_refused(alice: User, mine: Conversation) -> None:
    token = await sync_to_async(Token.objects.create)(user=alice)
    alice.is_active = False
    await sync_to_async(alice.save)()
    async with over_http(token.key) as http:
        response = await http.post(
            "/mcp", json=CALL, headers={"Accept": "application/json, text/event-stream"}
        )
    assert response.status_code == 401
    assert await entries(mine) == []


async def test_http_bearer_spelling_and_each_request_acts_for_its_token(
    bob: User, mine: Conversation, theirs: Conversation
) -> None:
    """A token works as ``Bearer`` too, and a request acts for its own token's user: Bob's
    token lists Bob's conversation, never Alice's."""
    key = await sync_to_async(Token.objects.create)(user=bob)
    async with over_http(None) as http:
        http.headers["Authorization"] = f"Bearer {key.key}"
        async with Client(streamable_http_client("http://testserver/mcp", http_client=http)) as c:
            listed = body(await c.call_tool("list_conversations", {}))
            assert [row["id"] for row in listed["results"]] == [str(theirs.pk)]
            denied = refusal(
                await c.call_tool("read_transcript", {"conversation_id": str(mine.pk)})
            )
            assert denied == NOT_FOUND
    assert await entries(mine) == []
    assert await entries(theirs) == [("bob", "mcp-list")]


async def test_bad_arguments_are_refused_with_what_to_fix(alice: User, mine: Conversation) -> None:
    token = await sync_to_async(Token.objects.create)(user=alice)
    async with (
        over_http(token.key) as http,
        Client(streamable_http_client("http://testserver/mcp", http_client=http)) as client,
    ):
        cases = {
            ("search_conversations", "{}"): "query must be a string",
            ("search_conversations", '{"query": "  "}'): "query is empty; give at least one word",
            ("search_conversations", '{"query": "x", "cursor": "forged"}'): (
                "cursor is not valid for this listing; start again without it"
            ),
            ("list_conversations", '{"limit": "ten"}'): "limit must be an integer",
            ("list_conversations", '{"owner": "bob"}'): (
                "unknown argument 'owner'; list_conversations takes cursor, limit, query"
            ),
            ("read_transcript", '{"conversation_id": 7}'): "conversation_id must be a string",
        }
        for (name, arguments), expected in cases.items():
            answer = refusal(await client.call_tool(name, json.loads(arguments)))
            assert answer == expected, (name, arguments)
        # A cursor of one listing is refused by another (the REST API's own rule).
        page = body(
            await client.call_tool("read_transcript", {"conversation_id": str(mine.pk), "limit": 1})
        )
        crossed = refusal(
            await client.call_tool(
                "search_conversations", {"query": "tokenizer", "cursor": page["next_cursor"]}
            )
        )
        assert crossed == "cursor belongs to another listing, conversation or filter"
    # Refused calls read nothing and log nothing; the one page read is logged.
    assert await entries(mine) == [("alice", "mcp-transcript")]


async def test_pages_and_cursors_are_the_rest_apis(alice: User, mine: Conversation) -> None:
    """A tool's page is the REST route's page for the same request, cursor included."""
    token = await sync_to_async(Token.objects.create)(user=alice)
    api = APIClient()
    api.force_authenticate(alice)
    rest = await sync_to_async(api.get)(f"/api/conversations/{mine.pk}/transcript/?limit=1")
    async with (
        over_http(token.key) as http,
        Client(streamable_http_client("http://testserver/mcp", http_client=http)) as client,
    ):
        first = body(
            await client.call_tool("read_transcript", {"conversation_id": str(mine.pk), "limit": 1})
        )
        assert first["messages"] == rest.json()["messages"]
        # The REST API's cursor continues the tool's walk.
        cursor = rest.json()["next_cursor"]
        second = body(
            await client.call_tool(
                "read_transcript", {"conversation_id": str(mine.pk), "cursor": cursor, "limit": 1}
            )
        )
        assert second["messages"] == [
            {"role": "assistant", "content": "The tokenizer drops tabs; I will fix it."}
        ]
        rest_search = await sync_to_async(api.get)("/api/search/?q=tokenizer")
        found = body(await client.call_tool("search_conversations", {"query": "tokenizer"}))
        assert found["results"] == rest_search.json()["results"]


def test_mcp_server_command_refuses_an_unknown_or_inactive_owner(make_user: MakeUser) -> None:
    with pytest.raises(CommandError, match="no user with username 'nobody'") as unknown:
        call_command("mcp_server", "--owner", "nobody")
    assert unknown.value.returncode == 2
    make_user("gone", is_active=False)
    with pytest.raises(CommandError, match="'gone' is inactive") as inactive:
        call_command("mcp_server", "--owner", "gone")
    assert inactive.value.returncode == 2


@contextlib.asynccontextmanager
async def http_client(user: User) -> AsyncIterator[Client]:
    token = await sync_to_async(Token.objects.create)(user=user)
    async with (
        over_http(token.key) as http,
        Client(streamable_http_client("http://testserver/mcp", http_client=http)) as client,
    ):
        yield client


async def test_a_read_the_access_log_cannot_record_is_not_answered(
    alice: User, mine: Conversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    def busy(**kwargs: Any) -> NoReturn:
        raise WriteConflict("database is locked")

    monkeypatch.setattr(services, "log_agent_reads", busy)
    async with http_client(alice) as client:
        for name, arguments in (
            ("search_conversations", {"query": "tokenizer"}),
            ("list_conversations", {}),
            ("read_transcript", {"conversation_id": str(mine.pk)}),
        ):
            assert refusal(await client.call_tool(name, arguments)) == UNLOGGED


async def test_an_outage_is_an_error_result_and_an_unknown_tool_a_protocol_error(
    alice: User, mine: Conversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(*args: Any, **kwargs: Any) -> NoReturn:
        raise OperationalError("connection refused")

    monkeypatch.setattr(tools, "conversation_page", down)
    async with http_client(alice) as client:
        assert refusal(await client.call_tool("list_conversations", {})) == UNAVAILABLE
        with pytest.raises(MCPError, match="unknown tool 'delete_everything'") as unknown:
            await client.call_tool("delete_everything", {})
        assert unknown.value.code == INVALID_PARAMS
    assert await entries(mine) == []


async def test_http_during_an_outage_is_503_with_retry_after(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(self: Any, key: str) -> NoReturn:
        raise OperationalError("connection refused")

    token = await sync_to_async(Token.objects.create)(user=alice)
    monkeypatch.setattr(TokenAuthentication, "authenticate_credentials", down)
    async with over_http(token.key) as http:
        response = await http.post(
            "/mcp", json=LIST_TOOLS, headers={"Accept": "application/json, text/event-stream"}
        )
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert response.json()["code"] == "service_unavailable"


def test_mcp_server_command_without_the_sdk_says_what_to_install(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "murmur_conversations.mcp.server", None)  # not importable
    with pytest.raises(CommandError, match=r"install murmur-conversations\[mcp\]") as missing:
        call_command("mcp_server", "--owner", "alice")
    assert missing.value.returncode == 2
