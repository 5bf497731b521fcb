"""Redaction never corrupts what the provider issued and never misses a copy (docs/security.md
"Redaction"): opaque values and identities pass byte for byte; secrets planted through every
entry point are found in no column of any model (found by introspection, so a column added later
is covered), no export, no API response and no frame, not even in part.

Secrets are assembled at run time from pieces, so this file holds no literal token shape that a
secret scanner would flag.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import string
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import models
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from murmur_conversations import exporters, services, signals
from murmur_conversations.importers import registry
from murmur_conversations.logfilters import RedactQueryStrings
from murmur_conversations.models import Conversation, DisplayMessage, Message, SourceRecord
from murmur_conversations.redaction import Pieces, StoredPieces, redact
from murmur_conversations.traces import otlp
from tests.agentlog_lines import Claude, Codex, tool_use, write_jsonl
from tests.api_helpers import token_client, url
from tests.import_helpers import run, write_json, write_lines
from tests.otlp_helpers import hex_id, json_lines, proto_frames

pytestmark = pytest.mark.django_db

_ALNUM = "Qz7Lm2Xv9Kp4Rt8Wn3Hb6Jc1Fd5Gs0Ay"
#: One fake secret of each of several kinds (joined from pieces at run time).
SECRETS: dict[str, str] = {
    "github-token": "gh" + "p_" + (_ALNUM * 2)[:36],
    "aws-access-key": "AK" + "IA" + "Z7QX3MNB5KLP2RTV",
    "google-api-key": "AI" + "za" + "SyBc4Tn8Qw2Lm5Zr7Xk1Vp3Hj6Gd9Fs0Ae4",
    "anthropic-key": "sk-" + "ant-" + "api03-" + "Vb4Nm8Kq2Wx6Zc0Lp5Rt9Yh3Jd7Fg1Ms4Tu8Ea2Ow6Q",
    "openai-key": "sk-" + "proj-" + (_ALNUM[::-1] * 2)[:40],
}
#: Any run of this many characters of a secret is a leak.
WINDOW = 12


def _windows(secret: str) -> set[str]:
    return {secret[i : i + WINDOW] for i in range(len(secret) - WINDOW + 1)}


LEAKS = {window: name for name, secret in SECRETS.items() for window in _windows(secret)}


def leaks(text: str) -> set[str]:
    """The secrets of which ``text`` holds a run of :data:`WINDOW` characters or more."""
    return {name for window, name in LEAKS.items() if window in text}


# --------------------------------------------------------------------------- opaque values

_B64 = string.ascii_letters + string.digits + "+/"


def _b64_around(run: str, rng: random.Random) -> str:
    """Random base64 with ``run`` between separators, as in a real signature."""
    left = "".join(rng.choice(_B64) for _ in range(rng.randrange(0, 60)))
    right = "".join(rng.choice(_B64) for _ in range(rng.randrange(0, 60)))
    return f"{left}/{run}+{right}=="


def _opaque_message(blob: str) -> dict[str, Any]:
    return {
        "id": "msg_opaque",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": blob},
            {"type": "redacted_thinking", "data": blob},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": blob},
            },
            {"type": "document", "source": {"type": "base64", "media_type": "a/pdf", "data": blob}},
            {"type": "image", "image_url": {"url": f"data:image/png;base64,{blob}"}},
        ],
        "reasoning": {"type": "reasoning", "encrypted_content": blob},
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SECRETS)), st.randoms(use_true_random=False))
def test_key_shaped_runs_in_opaque_values_survive_byte_for_byte(name: str, rng: Any) -> None:
    blob = _b64_around(SECRETS[name], rng)
    message = _opaque_message(blob)
    assert redact(message, record=True).value == message
    codex = json.dumps(
        {"type": "response_item", "payload": {"type": "reasoning", "encrypted_content": blob}}
    )
    assert redact(codex, source_line=True).value == codex
    # the same line holding a plain secret too: rewritten, the opaque value kept
    both = json.dumps(
        {
            "type": "response_item",
            "payload": {"type": "reasoning", "encrypted_content": blob, "summary": [blob[:0]]},
            "note": f"token {SECRETS[name]}",
        }
    )
    stored = json.loads(redact(both, source_line=True).value)
    assert stored["payload"]["encrypted_content"] == blob
    assert not leaks(stored["note"])
    cut = both[: both.index('"note"')]  # a line cut off: not JSON, still kept opaque
    assert redact(cut, source_line=True).value == cut


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(SECRETS)),
    st.text(alphabet=string.ascii_letters + " .,:\n", max_size=30),
    st.text(alphabet=string.ascii_letters + " .,:\n", max_size=30),
    st.sampled_from(["id", "type", "call_id", "signature", "data", "text", "cmd"]),
)
def test_keys_in_plain_text_are_always_redacted(
    name: str, before: str, after: str, key: str
) -> None:
    secret = SECRETS[name]
    text = f"{before} {secret} {after}"
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": text},
            {"type": "tool_call", "id": "c1", "name": "t", "input": {key: text, secret: {key: 1}}},
        ],
        "metadata": {key: text, "nested": [{key: secret}]},
    }
    assert not leaks(json.dumps(redact(message, record=True).value))
    assert not leaks(json.dumps(redact({key: text, secret: [text]}).value))  # content throughout


def test_identities_the_provider_issued_pass_untouched() -> None:
    ids = {"id": "msg_01" + SECRETS["aws-access-key"], "call": "toolu_" + SECRETS["aws-access-key"]}
    message = {
        "id": ids["id"],
        "role": "assistant",
        "content": [{"type": "tool_use", "id": ids["call"], "name": "t", "input": {}}],
        "tool_calls": [{"id": ids["call"], "type": "function", "function": {"name": "t"}}],
    }
    assert redact(message, record=True).value == message


def test_a_redacted_key_that_meets_another_loses_no_member() -> None:
    secret = SECRETS["github-token"]
    value = {secret: 1, secret + " ": 2, "[REDACTED:github-token]": 3}
    redacted = redact(value).value
    assert sorted(redacted.values()) == [1, 2, 3] and not leaks(json.dumps(redacted))


def test_opaque_values_survive_the_store_and_the_anthropic_export(
    conversation: Conversation,
) -> None:
    blob = _b64_around(SECRETS["google-api-key"], random.Random(3))
    services.save_message(conversation=conversation, message=_opaque_message(blob))
    stored = Message.objects.get(conversation=conversation)
    assert stored.content == _opaque_message(blob)["content"]
    exported = "".join(exporters.export_anthropic(conversation))
    assert blob in exported and json.dumps(blob) in exported
    thinking = DisplayMessage.objects.get(conversation=conversation, content_type="thinking")
    assert thinking.content["signature"] == blob


# --------------------------------------------------------------------------- text in pieces


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(SECRETS)),
    st.sampled_from(["", "token: ", "key=", "the key is "]),
    st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=8),
)
def test_a_secret_split_across_increments_is_never_shown_in_part(
    name: str, before: str, cuts: list[int]
) -> None:
    text = f"deploy {before}{SECRETS[name]} and go on with more words"
    pieces, position, shown = Pieces(), 0, []
    for size in [*cuts, len(text)]:
        shown.append(pieces.add(text[position : position + size]))
        position += size
    assert not leaks("".join(shown)), shown
    assert "".join(shown).startswith("deploy ")
    assert "and go on" in "".join(shown)  # held text comes once the next increment tells


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SECRETS)), st.integers(min_value=1, max_value=60))
def test_a_line_cut_inside_a_secret_keeps_no_prefix_of_it(name: str, keep: int) -> None:
    secret = SECRETS[name]
    text = "here it is: " + secret[: min(keep, len(secret) - 1)]
    line = json.dumps({"type": "item.updated", "item": {"id": "item_1", "text": text}})
    stored = redact(line, source_line=True, cut=True).value
    assert not leaks(stored) and not any(secret[:8] in part for part in [stored])
    assert json.loads(stored)["item"]["id"] == "item_1"
    assert redact(line, source_line=True, cut=True).value == stored  # deterministic


def test_ordinary_text_cut_short_is_kept() -> None:
    line = json.dumps({"type": "item.updated", "item": {"id": "item_1", "text": "Running the te"}})
    assert redact(line, source_line=True, cut=True).value == line


def _stream_event(text: str) -> str:
    event = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": text}}
    return json.dumps({"type": "stream_event", "session_id": "st-9", "event": event})


@pytest.mark.parametrize("cuts", [(5, 12), (9, 30), (4, 8, 20, 40), (16,)])
def test_increments_kept_as_lines_keep_no_part_of_a_split_secret(
    user: User, tmp_path: Path, cuts: tuple[int, ...]
) -> None:
    text = "use key " + SECRETS["github-token"] + " then go on"
    pieces, position = [], 0
    for cut in [*cuts, len(text)]:
        if text[position:cut]:
            pieces.append(text[position:cut])
        position = max(position, cut)
    plain = [_stream_event("Hello"), _stream_event(" there, file.py")]
    path = write_lines(
        tmp_path / "stream.jsonl",
        json.dumps({"type": "system", "subtype": "init", "session_id": "st-9", "cwd": "/t"}),
        json.dumps(
            {"type": "user", "message": {"role": "user", "content": "hi"}, "session_id": "st-9"}
        ),
        *plain,
        *(_stream_event(piece) for piece in pieces),
    )
    code, _out, err = run(path, "--owner", user.username)
    assert code == 0, err
    raws = list(SourceRecord.objects.order_by("line_number").values_list("raw", flat=True))
    assert not leaks("".join(raws)), raws
    assert raws[2:4] == plain  # increments no secret touches are kept byte for byte


def test_stored_pieces_replace_only_what_a_secret_touches() -> None:
    pieces = StoredPieces()
    secret = SECRETS["aws-access-key"]
    stored = [pieces.add(p) for p in ("the key ", secret[:6], secret[6:14], secret[14:], " ok")]
    assert stored[0] == "the key " and stored[-1] == " ok"
    assert not leaks("".join(stored)) and all(secret[:6] not in p for p in stored)


# --------------------------------------------------------------------------- the sweep


def _secret_text(name: str, pad: int = 0) -> str:
    """A sentence holding the secret ``name``, the secret starting ``pad`` characters in."""
    return "x" * pad + f"{SECRETS[name]} is the key"


def _import_files(tmp: Path) -> list[Path]:
    """One small file of every import format, its first prompt holding a secret that crosses
    character 80 (where importers cut titles), and a secret in tool arguments."""
    prompt = "please deploy " + "w" * 60 + " " + SECRETS["github-token"] + " now"
    arguments = {"command": f"export K={SECRETS['aws-access-key']}", SECRETS["google-api-key"]: 1}
    files = []
    claude = Claude()
    files.append(
        write_jsonl(
            tmp / "claude" / "s.jsonl",
            [
                claude.prompt(prompt),
                claude.answer("msg_a", tool_use("toolu_1", "Bash", **arguments)),
                claude.result("toolu_1", f"ok {SECRETS['openai-key']}"),
            ],
        )
    )
    codex = Codex()
    files.append(
        write_jsonl(
            tmp / "codex" / "rollout.jsonl",
            [
                codex.meta(),
                codex.message("user", prompt),
                codex.item(
                    type="function_call",
                    name="shell",
                    arguments=json.dumps(arguments),
                    call_id="call_1",
                ),
            ],
        )
    )
    cut = f"here {SECRETS['anthropic-key']}"
    files.append(
        write_lines(
            tmp / "exec.jsonl",
            json.dumps({"type": "thread.started", "thread_id": "019c8143-abe2-7722-9bd1"}),
            json.dumps({"type": "turn.started"}),
            json.dumps(
                {
                    "type": "item.updated",
                    "item": {"id": "item_1", "type": "agent_message", "text": cut[:-20]},
                }
            ),
            json.dumps(
                {
                    "type": "item.completed",
                    "item": {"id": "item_1", "type": "agent_message", "text": prompt + cut},
                }
            ),
        )
    )
    files.append(
        write_lines(
            tmp / "stream.jsonl",
            json.dumps({"type": "system", "subtype": "init", "session_id": "st-1", "cwd": "/t"}),
            json.dumps(
                {
                    "type": "user",
                    "message": {"role": "user", "content": prompt},
                    "session_id": "st-1",
                }
            ),
        )
    )
    files.append(
        write_lines(
            tmp / "murmur.jsonl",
            json.dumps({"role": "user", "content": prompt, "id": "u1"}),
            json.dumps(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_call", "id": "c1", "name": "sh", "input": arguments}
                    ],
                    "id": "a1",
                }
            ),
        )
    )
    files.append(write_json(tmp / "openai.json", [{"role": "user", "content": prompt}]))
    files.append(
        write_json(
            tmp / "anthropic.json",
            [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        )
    )
    files.append(
        write_json(
            tmp / "footprint.json",
            {
                "format": "conversation-v1",
                "savedAt": 1700000000000,
                "data": {
                    "version": 1,
                    "runId": "r1",
                    "history": [{"role": "user", "content": prompt}],
                },
            },
        )
    )
    muse = {
        "schema_version": 1,
        "id": "env-1",
        "stream": {"kind": "session", "id": "s-1"},
        "sequence": 1,
        "recorded_at": 1780531400000001,
        "record_type": "event",
        "durability": "durable",
        "causation_id": "r-1",
        "payload_type": "turn.input.user",
        "payload_schema_version": 1,
        "payload": {
            "command_id": "r-1",
            "run_stream": {"kind": "run", "id": "r-1"},
            "kind": "turn_input_user",
            "prompt": prompt,
        },
    }
    files.append(write_lines(tmp / "muse.jsonl", json.dumps(muse)))
    call = {"name": "shell", "arguments": json.dumps(arguments)}
    files.append(
        write_json(
            tmp / "vercel.json",
            {
                "id": "chat-1",
                "messages": [
                    {"id": "m1", "role": "user", "parts": [{"type": "text", "text": prompt}]},
                    {
                        "id": "m2",
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool-shell",
                                "toolCallId": "c1",
                                "state": "input-available",
                                "input": arguments,
                            }
                        ],
                    },
                ],
            },
        )
    )
    files.append(
        write_json(
            tmp / "agui.json",
            {
                "threadId": "thread-1",
                "runId": "run-1",
                "state": {},
                "tools": [],
                "context": [],
                "forwardedProps": {},
                "messages": [
                    {"id": "u1", "role": "user", "content": prompt},
                    {
                        "id": "a1",
                        "role": "assistant",
                        "content": "",
                        "toolCalls": [{"id": "c1", "type": "function", "function": call}],
                    },
                ],
            },
        )
    )
    files.append(
        write_json(
            tmp / "items.json",
            [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "user",
                    "content": [{"type": "input_text", "text": prompt}],
                },
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", **call},
            ],
        )
    )
    chat = [
        otlp.Span(
            hex_id(16, f"sweep {name}"),
            hex_id(8, f"sweep {name}"),
            "",
            "chat gpt-test",
            otlp.KIND_CLIENT,
            1_757_238_723_000_000_000,
            1_757_238_724_000_000_000,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-test",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [
                                {
                                    "type": "tool_call",
                                    "id": "c1",
                                    "name": "sh",
                                    "arguments": arguments,
                                }
                            ],
                        }
                    ]
                ),
            },
        )
        for name in ("json", "proto")
    ]
    files.append(write_lines(tmp / "traces.jsonl", json_lines(chat[:1]), end=""))
    proto = tmp / "traces.otlp"
    proto.write_bytes(proto_frames(chat[1:]))
    files.append(proto)
    return files


#: The files of _import_files that --format auto does not take as their format.
NOT_DETECTED = {
    "anthropic.json": ["--format", "anthropic"],
    "traces.otlp": ["--format", "otlp-proto"],
}


def _plant_everywhere(user: User, tmp: Path, shared: list[str]) -> list[Conversation]:
    """Secrets through every entry point: services, REST writes, every import format; the
    share links' tokens are added to ``shared``."""
    s = SECRETS
    chat = services.start_conversation(
        owner=user,
        title="t" * 70 + s["github-token"],
        metadata={"id": s["aws-access-key"], s["google-api-key"]: {"type": s["openai-key"]}},
    )
    services.save_messages(
        conversation=chat,
        messages=[
            {"role": "user", "content": _secret_text("anthropic-key"), "note": s["openai-key"]},
            {
                "role": "assistant",
                "model": s["aws-access-key"],
                "usage": {"input_tokens": 3, "output_tokens": 2},
                "content": [
                    {"type": "text", "text": _secret_text("google-api-key")},
                    {
                        "type": "tool_call",
                        "id": "call_1",
                        "name": "bash",
                        "input": {
                            "id": s["github-token"],
                            "type": s["aws-access-key"],
                            "deep": [{"call_id": s["openai-key"]}],
                            s["anthropic-key"]: "v",
                        },
                    },
                ],
            },
        ],
    )
    services.update_tool_status(
        conversation=chat,
        tool_info={
            "call_id": "call_1",
            "result": {"id": s["github-token"], "out": _secret_text("aws-access-key")},
            "display_text": _secret_text("openai-key"),
        },
        status="completed",
    )
    services.save_synthetic_message(
        conversation=chat,
        message_type="system",
        content_type="notification",
        content={"text": _secret_text("google-api-key")},
        metadata={"type": s["anthropic-key"]},
    )
    services.set_status(
        conversation=chat,
        status="paused",
        pending_ask={"question": _secret_text("github-token"), "tool": "ask", "pauseData": {}},
    )
    services.broadcast_delta(
        conversation=chat, stream_id="s1", text="key " + s["github-token"][:20]
    )
    services.broadcast_delta(conversation=chat, stream_id="s1", text=s["github-token"][20:])
    client = token_client(user)
    patched = client.patch(
        url(chat.pk),
        {
            "title": "p" * 60 + " " + s["anthropic-key"],
            "metadata": {"id": s["aws-access-key"], s["github-token"]: 1},
            "tags": ["y", s["aws-access-key"]],
        },
        format="json",
    )
    assert patched.status_code == 200, patched.content
    row = DisplayMessage.objects.filter(conversation=chat, message__isnull=False).first()
    assert row is not None
    feedback = client.put(
        url(chat.pk, f"display-messages/{row.pk}/feedback/"),
        {"rating": 1, "comment": _secret_text("openai-key")},
        format="json",
    )
    assert feedback.status_code in (200, 201), feedback.content
    share = client.post(url(chat.pk, "shares/"), {"mode": "snapshot"}, format="json")
    assert share.status_code == 201, share.content
    live = client.post(url(chat.pk, "shares/"), {"mode": "live"}, format="json")
    assert live.status_code == 201, live.content
    shared.extend([share.json()["token"], live.json()["token"]])
    fork = client.post(url(chat.pk, "fork/"), {"at_seq": row.seq}, format="json")
    assert fork.status_code == 201, fork.content
    services.place_hold(conversation=chat, reason=_secret_text("aws-access-key"))
    for path in _import_files(tmp):
        forced = NOT_DETECTED.get(path.name, [])
        code, _out, err = run(path, "--owner", user.username, *forced)
        assert code == 0, err
        assert not leaks(err), err
    return list(Conversation.objects.all())


def _columns() -> list[tuple[type[models.Model], str]]:
    """Every text and JSON column of every model of every installed app."""
    found = []
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if isinstance(field, models.CharField | models.TextField | models.JSONField):
                found.append((model, field.attname))
    return found


def sweep_columns() -> dict[str, set[str]]:
    """``{"<app>.<model>.<column>": secrets found}`` over every row of every column."""
    hits: dict[str, set[str]] = {}
    for model, column in _columns():
        for value in model._default_manager.values_list(column, flat=True).iterator():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            found = leaks(text or "")
            if found:
                hits.setdefault(f"{model._meta.label}.{column}", set()).update(found)
    return hits


def test_the_sweep_covers_every_text_and_json_column() -> None:
    columns = {f"{m._meta.label}.{c}" for m, c in _columns()}
    for expected in (
        "murmur_conversations.Conversation.title",
        "murmur_conversations.ImportedSource.titles",
        "murmur_conversations.SourceRecord.raw",
        "murmur_conversations.FrameLogEntry.frames",
        "murmur_conversations.Share.snapshot",
        "murmur_conversations.MessageUsage.model",
        "murmur_conversations.AccessLogEntry.actor_name",
    ):
        assert expected in columns


def test_secrets_planted_everywhere_are_found_nowhere(user: User, tmp_path: Path) -> None:
    deltas: list[str] = []
    shared: list[str] = []

    def heard(sender: Any, text: str, **kwargs: Any) -> None:
        deltas.append(text)

    signals.delta.connect(heard, weak=False)
    try:
        conversations = _plant_everywhere(user, tmp_path, shared)
    finally:
        signals.delta.disconnect(heard)
    assert deltas and not leaks("".join(deltas))
    assert len(conversations) >= 13
    sources = {c.source for c in conversations}
    assert set(registry.FORMAT_NAMES) <= sources | {"claude-code", "codex"}, sources
    assert sweep_columns() == {}
    client = token_client(user)
    for conversation in conversations:
        for fmt in ("murmur", "openai", "anthropic"):
            exported = "".join(getattr(exporters, f"export_{fmt}")(conversation))
            assert not leaks(exported), (fmt, conversation.source)
        routes = ("", "display-messages/", "record/", "transcript/", "pending/", "tool-calls/")
        for route in (*routes, "shares/", "access-log/"):
            response = client.get(url(conversation.pk, route))
            assert response.status_code == 200, response.content
            assert not leaks(response.content.decode()), route
    for token in shared:
        response = APIClient().get(f"/api/shared/{token}/")
        assert response.status_code == 200, response.content
        assert not leaks(response.content.decode()), token
    for path in ("conversations/", "usage/?group_by=model", "search/?q=deploy"):
        response = client.get(f"/api/{path}")
        assert response.status_code == 200, (path, response.content)
        assert not leaks(response.content.decode()), path
    refused = [
        client.patch(url(conversations[0].pk), {"tags": ["\x01" + SECRETS["aws-access-key"]]}),
        client.patch(url(conversations[0].pk), {"title": SECRETS["github-token"] * 9}),
        client.get("/api/search/?q=" + quote(SECRETS["openai-key"] + "\x00")),
        client.post(url(conversations[0].pk, "shares/"), {"mode": SECRETS["google-api-key"]}),
        client.post(url(conversations[0].pk, "fork/"), {"at_seq": SECRETS["aws-access-key"]}),
    ]
    for response in refused:  # an error that quotes what it refuses
        assert response.status_code == 400, response.content
        assert not leaks(response.content.decode()), response.content
    staff = Client()
    staff.force_login(User.objects.create_superuser("sweeper", password="pw"))
    pages = [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
        if model._meta.app_label == "murmur_conversations"
    ]
    pages += [
        reverse("admin:murmur_conversations_conversation_change", args=[c.pk])
        for c in conversations
    ]
    for page in [*pages, pages[0] + "?q=deploy"]:
        html = staff.get(page)
        assert html.status_code == 200, page
        assert not leaks(html.content.decode()), page


def test_the_sweep_finds_a_secret_written_around_redaction(conversation: Conversation) -> None:
    assert sweep_columns() == {}
    Conversation.objects.filter(pk=conversation.pk).update(title="k " + SECRETS["aws-access-key"])
    SourceRecord.objects.create(
        conversation=conversation,
        source="murmur",
        source_key="raw:1",
        raw=SECRETS["github-token"][:WINDOW],  # a prefix is enough
    )
    assert sweep_columns() == {
        "murmur_conversations.Conversation.title": {"aws-access-key"},
        "murmur_conversations.SourceRecord.raw": {"github-token"},
    }


def test_a_base64_blob_is_not_a_leak() -> None:
    assert leaks(base64.b64encode(SECRETS["github-token"].encode()).decode()) == set()


# --------------------------------------------------------------------------- access logs


def _records(path: str) -> list[logging.LogRecord]:
    """The access-log records uvicorn, Django's runserver and Daphne's runserver make."""
    uvicorn = logging.LogRecord(
        "uvicorn.access",
        20,
        "",
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("1.2.3.4", "GET", path, "1.1", 200),
        None,
    )
    django = logging.LogRecord(
        "django.server", 20, "", 0, '"%s" %s %s', (f"GET {path} HTTP/1.1", "200", "12"), None
    )
    daphne = logging.LogRecord(
        "django.channels.server", 20, "", 0, "HTTP %(method)s %(path)s", None, None
    )
    daphne.args = {"method": "GET", "path": path, "status": 200}
    return [uvicorn, django, daphne]


@pytest.mark.parametrize(
    "query",
    [
        "search/?q=" + quote(SECRETS["github-token"]),
        "search/?q=deploy+" + quote(SECRETS["aws-access-key"]) + "&page=2",
        "conversations/?tag=" + quote(SECRETS["google-api-key"]),
        "conversations/x/display-messages/?since=" + quote(SECRETS["openai-key"]),
        "usage/?" + quote(SECRETS["anthropic-key"]) + "=1",
    ],
)
def test_the_access_log_filter_masks_secrets_in_query_strings(query: str) -> None:
    for record in _records(f"/api/{query}"):
        assert RedactQueryStrings().filter(record) is True
        line = record.getMessage()
        assert not leaks(line) and "[REDACTED:" in line and "/api/" in line, line


def test_the_access_log_filter_keeps_a_clean_line_as_it_is() -> None:
    for record in _records("/api/search/?q=deploy%20now&page=2"):
        before = record.getMessage()
        RedactQueryStrings().filter(record)
        assert record.getMessage() == before


def test_the_demo_filters_every_access_log() -> None:
    from project import settings as demo

    config: Any = demo.LOGGING
    handlers, filters = config["handlers"], config["filters"]
    for name in ("uvicorn.access", "django.server", "django.channels.server"):
        for handler in config["loggers"][name]["handlers"]:
            used = [filters[f]["()"] for f in handlers[handler].get("filters", [])]
            assert "murmur_conversations.logfilters.RedactQueryStrings" in used


def test_an_api_error_that_quotes_a_secret_answers_it_redacted() -> None:
    from rest_framework.exceptions import ValidationError

    from murmur_conversations.api.exceptions import exception_handler

    response = exception_handler(ValidationError(f"not {SECRETS['github-token']!r}"), {})
    assert response is not None and response.status_code == 400
    assert response.data["detail"] == "not '[REDACTED:github-token]'"
