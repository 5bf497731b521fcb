"""Shared pieces of the API tests (docs/api.md): token clients and response comparison."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import schemathesis
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from schemathesis import BaseSchema

from murmur_conversations.models import Conversation
from tests.helpers import Response
from tests.import_helpers import JSON

#: Query parameters of a request.
Params = dict[str, str | int]

API = "/api/"
#: The one not-found body, byte for byte.
NOT_FOUND = b'{"detail":"Not found.","code":"not_found"}'
DETAIL_ROUTES = ("", "display-messages/", "record/", "transcript/", "pending/", "tool-calls/")
#: Spellings that name no conversation: each must answer like a missing one.
MALFORMED_IDS = (
    "nope",
    "0",
    "%20",
    "..",
    "12345678123456781234567812345678",
    "{12345678-1234-5678-1234-567812345678}",
    "urn:uuid:12345678-1234-5678-1234-567812345678",
    "%E2%98%83",
)


def token_client(user: User) -> APIClient:
    """An APIClient authenticated with a DRF token for ``user``."""
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def url(conversation_id: object, route: str = "") -> str:
    """``/api/conversations/<id>/<route>``."""
    return f"{API}conversations/{conversation_id}/{route}"


def missing_id() -> str:
    return str(uuid.uuid4())


def malformed_variants(conversation: Conversation) -> list[str]:
    """Malformed spellings, including non-canonical spellings of a real (own) id."""
    text = str(conversation.pk)
    return [*MALFORMED_IDS, text.upper(), text.replace("-", ""), text + "x", "%20" + text]


def post_body(
    client: APIClient, path: str, body: JSON, content_type: str = "application/json", **extra: Any
) -> Response:
    """POST ``body`` to ``path``: a str or bytes as it is (malformed bodies are the point of some
    tests), anything else as JSON."""
    raw = body if isinstance(body, str | bytes) else json.dumps(body)
    # DRF's stub says str; the test client sends bytes as they are.
    return client.generic("POST", path, raw, content_type=content_type, **extra)  # type: ignore[arg-type]


def shape(response: Response) -> tuple[int, bytes, tuple[tuple[str, str], ...]]:
    """Status, body bytes and headers except Date: what must be identical for denials."""
    headers = tuple(sorted((k, v) for k, v in response.headers.items() if k.lower() != "date"))
    return response.status_code, response.content, headers


# ----------------------------------------------------------------------------- schemathesis


def load_schema(client: APIClient) -> BaseSchema:
    response = client.get(f"{API}schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    raw = json.loads(response.content)
    assert {p.removeprefix("/api/") for p in raw["paths"]} >= {
        "conversations/",
        "conversations/{id}/",
        "conversations/{id}/record/",
        "ws-ticket/",
        "session/",
    }
    return schemathesis.openapi.from_dict(raw)


@contextmanager
def keep_test_connection() -> Iterator[None]:
    """Run WSGI requests without closing the test's database connection around each one (as
    Django's test client does)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
