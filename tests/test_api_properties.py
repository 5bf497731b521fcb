"""Properties of the whole API (docs/api.md): with several users and random requests no
response carries another owner's data and every denial equals the missing-conversation answer
(hypothesis); and the served OpenAPI schema matches the responses, with no server error
(schemathesis)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from schemathesis import Case, checks
from schemathesis.core.result import Ok
from schemathesis.generation.modes import GenerationMode

from murmur_conversations import services
from murmur_conversations.models import Conversation
from tests.api_helpers import (
    API,
    DETAIL_ROUTES,
    MALFORMED_IDS,
    keep_test_connection,
    load_schema,
    shape,
    token_client,
    url,
)
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db
#: user name -> (an API client of theirs, their conversations)
World = dict[str, tuple[APIClient, list[Conversation]]]
QUICK = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def populate(make_user: MakeUser, make_conversation: MakeConversation) -> World:
    """Three users with two conversations each; every string inside names its owner."""
    world: World = {}
    for name in ("ann", "bob", "cyd"):
        owner = make_user(username=f"{name}-{uuid.uuid4().hex[:6]}")
        conversations = []
        for index in range(2):
            marker = f"{name}-secret-{index}"
            conversation = make_conversation(owner=owner, title=marker, metadata={"m": marker})
            services.save_message(
                conversation=conversation,
                message={
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": marker},
                        {"type": "tool_call", "id": f"{marker}-call", "name": marker, "input": {}},
                    ],
                },
            )
            if index:
                services.set_status(
                    conversation=conversation, status="paused", pending_ask={"question": marker}
                )
            conversations.append(conversation)
        world[name] = (token_client(owner), conversations)
    return world


QUERIES = st.sampled_from(
    ["", "?limit=1", "?limit=x", "?since=0", "?since=-1", "?status=pending", "?status=x",
     "?cursor=forged", "?owner=1&user=2", "?format=api"]
)  # fmt: skip
METHODS = st.sampled_from(["get", "head", "options", "patch", "delete", "put", "post"])


def test_no_foreign_data_and_every_denial_is_the_missing_answer(
    make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    world = populate(make_user, make_conversation)

    @QUICK
    @given(
        caller=st.sampled_from(sorted(world)),
        target=st.sampled_from(["own", "foreign", "missing", "malformed"]),
        pick=st.integers(0, 5),
        route=st.sampled_from(DETAIL_ROUTES),
        method=METHODS,
        query=QUERIES,
    )
    def check(caller: str, target: str, pick: int, route: str, method: str, query: str) -> None:
        client, own = world[caller]
        others = [c for name, (_, cs) in world.items() if name != caller for c in cs]
        if method == "delete" and target == "own":
            method = "get"  # keep the world intact; own deletes are tested elsewhere
        ids = {
            "own": str(own[pick % 2].pk),
            "foreign": str(others[pick % len(others)].pk),
            "missing": str(uuid.uuid4()),
            "malformed": MALFORMED_IDS[pick % len(MALFORMED_IDS)],
        }
        send = getattr(client, method)
        body = {"title": f"{caller}-renamed"} if method in ("patch", "put", "post") else None
        kwargs = {"format": "json"} if body is not None else {}
        response = send(url(ids[target], route) + query, body, **kwargs)
        assert response.status_code < 500
        text = response.content.decode()
        for name in world:
            if name != caller:
                assert f"{name}-secret" not in text
                assert f"{name}-renamed" not in text
        if target != "own":
            missing = send(url(str(uuid.uuid4()), route) + query, body, **kwargs)
            assert shape(response) == shape(missing)
            assert response.status_code in (404, 405)

    check()
    for name, (client, _) in world.items():
        listed = client.get(f"{API}conversations/").json()["results"]
        assert {row["title"].split("-")[0] for row in listed} == {name}


# ----------------------------------------------------------------------------- schemathesis

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]


#: Operations whose every parameter is a free string and which take no body: negative mode has
#: nothing to break (hypothesis reports them unsatisfiable).
NOTHING_TO_NEGATE = {
    "GET /api/conversations/{id}/",
    "DELETE /api/conversations/{id}/",
    "DELETE /api/conversations/{id}/display-messages/{display_id}/feedback/",
    "GET /api/conversations/{id}/pending/",
    "DELETE /api/conversations/{id}/shares/{share_id}/",
    "POST /api/ws-ticket/",
}
#: Writes that read a body, sent to a real conversation half of the time (the others get 404).
REAL_TARGETS = {"GET", "PATCH", "POST"}


def realistic(case: Case[Any], own: list[Conversation]) -> None:
    """What a schema cannot say, filled in as a client would: half of the ids name a real
    conversation of the caller (the others: 404, which both modes allow), and a fork of it cuts
    at one of its rows; a positive case sends
    no ``cursor`` (only ones the server signed are valid, as only real ids are found) and a
    ``from`` no later than its ``to``."""
    ids = case.path_parameters or {}
    real = "id" in ids and case.method in REAL_TARGETS and len(str(ids["id"])) % 2 == 1
    if real:
        ids["id"] = str(own[1].pk)  # paused with a pending ask: the answer route too
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    body: dict[str, Any] = case.body if isinstance(case.body, dict) else {}
    at_seq = body.get("at_seq")
    if real and case.operation.path.endswith("/fork/") and isinstance(at_seq, int):
        body["at_seq"] = (at_seq - 1) % 2 + 1  # a row of it (it has two), as a real id
    query = case.query if isinstance(case.query, dict) else {}
    query.pop("cursor", None)
    start, end = query.get("from"), query.get("to")
    if isinstance(start, str) and isinstance(end, str) and start > end:
        query["from"], query["to"] = end, start


def run_mode(
    operation: Any, mode: GenerationMode, app: Any, token: str, own: list[Conversation]
) -> None:
    """12 cases (6 negative ones) of ``operation`` in ``mode``, each sent and checked: positive cases conform and
    are accepted, negative ones are refused (and never a server error)."""
    positive = mode == GenerationMode.POSITIVE
    if positive:
        checked = [*CHECKS, checks.positive_data_acceptance]
    else:
        checked = [checks.not_a_server_error, checks.negative_data_rejection]

    # An operation with nothing to negate filters out every input: Unsatisfiable, not a health
    # check failure.
    @settings(QUICK, max_examples=12 if positive else 6, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: Case[Any]) -> None:
        realistic(case, own)
        with keep_test_connection():
            case.call_and_validate(app=app, headers={"Authorization": token}, checks=checked)

    check()


def test_schema_matches_the_responses(
    make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    """Positive mode (schema-valid requests): every response conforms and none is a 400;
    negative mode (requests the schema forbids): none is a 2xx (or a server error)."""
    world = populate(make_user, make_conversation)
    client, own = world["ann"]
    schema = load_schema(client)
    token = f"Token {Token.objects.get(user=own[0].owner).key}"
    app = get_wsgi_application()
    seen = 0
    unsatisfiable = set()
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                run_mode(operation, mode, app, token, own)
            except Unsatisfiable:
                assert mode == GenerationMode.NEGATIVE
                unsatisfiable.add(f"{operation.method.upper()} {operation.path}")
        seen += 1
    # the 11 routes of the app, the answer and access-log routes (the token is the demo's),
    # search/ and usage/, and feedback (PUT, DELETE), fork, share links (GET, POST, DELETE) and
    # the shared view, and the export
    assert seen == 23
    assert unsatisfiable <= NOTHING_TO_NEGATE
