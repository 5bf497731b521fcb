"""Shared pieces of the API tests (docs/api.md): token clients and response comparison."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

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
