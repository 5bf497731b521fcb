"""Redaction at write time (docs/write-path.md "Redaction"): every detector, in every field that
enters the store, on every write path; identities untouched; deterministic and idempotent; counts
kept in the same write; linear-time scanning of large and adversarial texts.

Secrets are assembled at run time from pieces, so this file holds no literal token shape that a
secret scanner would flag.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.http import HttpResponseBase, StreamingHttpResponse
from django.test import Client, override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from murmur_conversations import checks, redaction, services, signals
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.exporters import export_murmur
from murmur_conversations.messages import normalize_message
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    RedactionCount,
    SourceRecord,
    ToolCall,
)
from murmur_conversations.redaction import redact
from tests.helpers import MakeUser
from tests.import_helpers import JSON

pytestmark = pytest.mark.django_db


def _b64url(value: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


ALNUM = "Qz7Lm2Xv9Kp4Rt8Wn3Hb6Jc1Fd5Gs0Ay"
#: detector name -> a fake secret of its shape (joined from pieces at run time)
SECRETS: dict[str, str] = {
    "aws-access-key": "AK" + "IA" + "Z7QX3MNB5KLP2RTV",
    "github-token": "gh" + "p_" + (ALNUM * 2)[:36],
    "slack-token": "xo" + "xb-" + "2741968305-9182736450-" + "k3j5h7g9f2d4s6a8",
    "slack-webhook": "https://hooks.slack.com/services/" + "T0A1B2C3D/B4E5F6G7H/" + ALNUM[:24],
    "jwt": _b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + _b64url({"sub": "42", "name": "Ada"})
    + "."
    + ALNUM[:32],
    "stripe-key": "sk" + "_live_" + ALNUM[:24],
    "sendgrid-key": "S" + "G." + ALNUM[:22] + "." + (ALNUM * 2)[:43],
    "twilio-key": "S" + "K" + "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    "mailchimp-key": "0a1b2c3d4e5f60718293a4b5c6d7e8f9" + "-us" + "12",
    "npm-token": "np" + "m_" + (ALNUM * 2)[:36],
    "square-oauth": "sq0" + "csp-" + (ALNUM * 2)[:43],
    "anthropic-key": "sk-" + "ant-api03-" + (ALNUM * 3)[:90],
    "openai-key": "sk-" + "proj-" + (ALNUM * 2)[:48],
    "google-api-key": "AI" + "za" + (ALNUM * 2)[:35],
    "gitlab-token": "gl" + "pat-" + ALNUM[:20],
    "huggingface-token": "h" + "f_" + ALNUM[:34],
}
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "\n".join([(ALNUM * 3)[:64]] * 4)
    + "\n-----END RSA PRIVATE KEY-----"
)
#: Secrets that need context around them: (detector, text, the secret part)
CONTEXTUAL = [
    ("aws-secret-key", "aws_secret_access_key = " + (ALNUM * 2)[:40], (ALNUM * 2)[:40]),
    ("basic-auth", "postgres://admin:" + ALNUM[:14] + "@db.internal:5432/app", ALNUM[:14]),
    ("keyword-secret", "export DB_PASSWORD=" + "Xy7#kq9!Lmn2" + " && run", "Xy7#kq9!Lmn2"),
    ("private-key", "key:\n" + PEM + "\nend", (ALNUM * 3)[:64]),
    ("artifactory-token", 'token "AKC' + ALNUM[:20] + '"', "AKC" + ALNUM[:20]),
]
ALL_CASES = [(name, f"use {secret} now", secret) for name, secret in SECRETS.items()] + CONTEXTUAL


def marker(name: str) -> str:
    return f"[REDACTED:{name}]"


def app_rows_text() -> str:
    """Every row of every table the app owns, as JSON text (what "stored nowhere" checks)."""
    parts = []
    for model in apps.get_app_config("murmur_conversations").get_models():
        for row in model._default_manager.values():
            parts.append(json.dumps(row, default=str, ensure_ascii=False))
    return "\n".join(parts)


def counts_of(conversation: Conversation) -> dict[str, int]:
    return dict(
        RedactionCount.objects.filter(conversation=conversation).values_list("detector", "count")
    )


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(("name", "text", "secret"), ALL_CASES, ids=[c[0] for c in ALL_CASES])
def test_each_detector_replaces_its_secret_in_place(name: str, text: str, secret: str) -> None:
    value, counts = redact(text)
    assert secret not in value
    assert marker(name) in value
    assert counts == {name: 1}
    # the rest of the text is kept around the marker
    assert value.replace(marker(name), secret, 1) == text or name in {"private-key"}


def test_a_pem_block_goes_from_begin_line_to_end_line() -> None:
    value, _ = redact("before\n" + PEM + "\nafter")
    assert value == "before\n[REDACTED:private-key]\nafter"
    truncated, _ = redact("cat id_rsa\n" + PEM.split("-----END")[0] + "(output cut)")
    assert truncated == "cat id_rsa\n[REDACTED:private-key](output cut)"


def test_placeholders_and_ordinary_values_behind_keywords_are_kept() -> None:
    for text in (
        "password=${DB_PASSWORD}",
        "password: hunter22",
        "token_count: 12345678",
        "api_key=<your key here>",
        "password = os.environ",
        "secret: 00000000-0000-4000-8000-000000000000",
        "max_tokens=4096 and input_tokens: 123456789",
    ):
        assert redact(text).counts == {}, text


def test_json_structure_keys_and_identities_are_kept() -> None:
    secret = SECRETS["aws-access-key"]
    value: dict[str, JSON] = {
        "id": secret,
        "role": "user",
        "content": [
            {"type": "tool_call", "id": secret, "name": "bash", "input": {"cmd": f"echo {secret}"}},
            {"type": "text", "text": f"key {secret}", secret: 1},
        ],
        "tool_call_id": secret,
        "nested": {"password": "Zq8#mP2$vL9!x", "count": 3, "list": [secret, 1.5, None, True]},
    }
    redacted, counts = redact(value, record=True)
    assert redacted["id"] == secret and redacted["tool_call_id"] == secret
    assert redacted["content"][0]["id"] == secret
    assert redacted["content"][0]["input"] == {"cmd": "echo [REDACTED:aws-access-key]"}
    assert redacted["content"][1] == {  # a key is content: redacted
        "type": "text",
        "text": "key [REDACTED:aws-access-key]",
        "[REDACTED:aws-access-key]": 1,
    }
    assert redacted["nested"] == {
        "password": "[REDACTED:keyword-secret]",
        "count": 3,
        "list": ["[REDACTED:aws-access-key]", 1.5, None, True],
    }
    assert counts == {"aws-access-key": 4, "keyword-secret": 1}


def test_nothing_found_returns_the_same_object() -> None:
    value = {"role": "user", "content": "the parser drops a trailing newline"}
    result = redact(value)
    assert result.value is value and result.counts == {}


# --------------------------------------------------------------------------- idempotence

_FRAGMENTS = [
    *SECRETS.values(),
    PEM,
    "-----BEGIN EC PRIVATE KEY-----\n",
    "-----END EC PRIVATE KEY-----",
    "password=",
    "api_key: ",
    '"token": "',
    "://user:",
    "@host",
    "[REDACTED:",
    "[REDACTED:jwt]",
    "]",
    "eyJ",
    ".",
    "=",
    " ",
    "\n",
    "AKIA",
    "xoxb-",
    "Xy7#kq9!Lmn2",
]
texts = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=12)), max_size=12).map(
    "".join
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), texts),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["text", "password", "id", "cmd", "api_key"]), inner, max_size=4
        ),
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_redaction_is_idempotent_and_deterministic_on_text(text: str) -> None:
    once = redact(text)
    assert redact(text) == once
    twice = redact(once.value)
    assert twice.value == once.value
    assert twice.counts == {}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_redaction_is_idempotent_on_json_values(value: JSON) -> None:
    once = redact(value).value
    assert redact(once).value == once
    assert redact(once).counts == {}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["role", "content", "id", "password"]), texts, min_size=1))
def test_a_source_line_is_kept_byte_for_byte_or_redacted_to_a_fixed_point(
    value: dict[str, str],
) -> None:
    line = json.dumps(value, separators=(", ", ": "))  # not the compact form: bytes matter
    stored = redact(line, source_line=True).value
    if stored != line:
        assert redact(stored, source_line=True).value == stored
        assert json.loads(stored) == redact(json.loads(line), record=True).value


# --------------------------------------------------------------------------- every write path


@pytest.mark.parametrize(("name", "text", "secret"), ALL_CASES, ids=[c[0] for c in ALL_CASES])
def test_secrets_in_every_field_of_a_message_never_reach_a_table(
    conversation: Conversation, name: str, text: str, secret: str
) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": text, "note": text},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "text": text},
                    {"type": "text", "text": text},
                    {"type": "tool_call", "id": "call_a", "name": "bash", "input": {"cmd": text}},
                    {"type": "custom_block", "payload": text},
                ],
                "tool_calls": [
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "run", "arguments": json.dumps({"cmd": text})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": text},
        ],
    )
    services.update_tool_status(
        conversation=conversation,
        status="executing",
        tool_info={"call_id": "call_b", "display_text": text},
    )
    services.update_tool_status(
        conversation=conversation, status="failed", tool_info={"call_id": "call_b", "error": text}
    )
    services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="error",
        content={"text": text},
        metadata={"detail": text},
    )
    services.update_conversation(conversation=conversation, title=text[:200], metadata={"k": text})
    services.set_status(conversation=conversation, status="paused", pending_ask={"question": text})
    services.answer_pending_ask(conversation=conversation, answer=text)
    services.save_source_records(
        conversation=conversation,
        source="murmur",
        records=[{"source_key": "k", "line_number": 1, "raw": json.dumps({"x": text})}],
    )
    stored = app_rows_text()
    assert secret not in stored
    assert marker(name) in stored
    assert ToolCall.objects.get(call_id="call_a").status == "completed"  # ids still link
    counts = counts_of(conversation)
    assert set(counts) == {name}
    # record message 1 (content + note), 2 (4 blocks + arguments), 3, error, display text,
    # synthetic content + metadata, title, metadata, ask, answer, source line
    assert counts[name] >= 14


def test_counts_are_kept_in_the_write_and_a_known_id_adds_none(conversation: Conversation) -> None:
    secret = SECRETS["github-token"]
    message = {"id": "m1", "role": "user", "content": f"a {secret} b {secret}"}
    services.save_message(conversation=conversation, message=message)
    assert counts_of(conversation) == {"github-token": 2}
    services.save_message(conversation=conversation, message=message)
    assert counts_of(conversation) == {"github-token": 2}
    services.save_message(conversation=conversation, message={"role": "user", "content": secret})
    assert counts_of(conversation) == {"github-token": 3}
    same_title = f"t {secret}"
    services.update_conversation(conversation=conversation, title=same_title)
    services.update_conversation(conversation=conversation, title=same_title)  # no change
    assert counts_of(conversation) == {"github-token": 4}


def test_save_messages_takes_only_what_normalize_message_returned(
    conversation: Conversation,
) -> None:
    """A ``NormalizedMessage`` skips normalisation in ``save_messages`` (importers validate first);
    one built by hand, or checked against another limit, was never validated or redacted, and is
    refused before anything is written."""
    secret = SECRETS["github-token"]
    limit = app_settings.max_content_bytes
    checked = normalize_message(
        {"id": "ok", "role": "user", "content": secret}, max_content_bytes=limit
    )
    assert secret not in json.dumps(checked.content)
    by_hand = dataclasses.replace(checked, message_id="raw", content=secret, checked_limit=None)
    other_limit = normalize_message(
        {"id": "big", "role": "user", "content": "x"}, max_content_bytes=limit + 1
    )
    for bad in (by_hand, other_limit):
        with pytest.raises(InvalidContent, match="message 1: a NormalizedMessage"):
            services.save_messages(conversation=conversation, messages=[checked, bad])
    assert not Message.objects.filter(conversation=conversation).exists()
    services.save_messages(conversation=conversation, messages=[checked])
    stored = Message.objects.get(conversation=conversation)
    assert (stored.message_id, secret in json.dumps(stored.content)) == ("ok", False)


def test_a_start_title_and_metadata_are_redacted_and_counted(user: User) -> None:
    secret = SECRETS["aws-access-key"]  # 20 characters; its marker is 25
    conversation = services.start_conversation(
        owner=user, title="x" * 234 + " " + secret, metadata={"note": secret}
    )
    assert conversation.title == "x" * 234 + " "  # the marker did not fit: dropped whole
    assert conversation.metadata == {"note": marker("aws-access-key")}
    assert counts_of(conversation) == {"aws-access-key": 1 + 1}


def test_ids_given_by_the_writer_are_never_changed(conversation: Conversation) -> None:
    secret = SECRETS["aws-access-key"]
    services.save_message(
        conversation=conversation,
        message={
            "id": secret,
            "role": "assistant",
            "content": [{"type": "tool_call", "id": secret, "name": "t", "input": {}}],
        },
    )
    services.save_message(
        conversation=conversation, message={"role": "tool", "tool_call_id": secret, "content": "ok"}
    )
    assert Message.objects.filter(message_id=secret).count() == 1
    assert ToolCall.objects.get(call_id=secret).status == "completed"


def test_deltas_and_the_pending_answer_signal_carry_redacted_text(
    conversation: Conversation, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    secret = SECRETS["openai-key"]
    heard: list[dict[str, Any]] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        heard.append(kwargs)

    signals.delta.connect(receiver, dispatch_uid="test-delta")
    signals.pending_answered.connect(receiver, dispatch_uid="test-answered")
    try:
        services.broadcast_delta(conversation=conversation, stream_id="s", text=f"k={secret} ")
        services.set_status(
            conversation=conversation, status="paused", pending_ask={"question": "key?"}
        )
        with django_capture_on_commit_callbacks(execute=True):
            services.answer_pending_ask(conversation=conversation, answer=secret)
    finally:
        signals.delta.disconnect(dispatch_uid="test-delta")
        signals.pending_answered.disconnect(dispatch_uid="test-answered")
    assert heard[0]["text"] == "k=" + marker("openai-key") + " "
    assert heard[-1]["answer"] == marker("openai-key")


# --------------------------------------------------------------------------- imports


def _murmur_file(tmp_path: Path, lines: list[str]) -> Path:
    folder = tmp_path / "rec" / "ctx"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "conversation.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _import(path: Path, owner: User, *extra: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "import_conversations", str(path), "--owner", owner.username, *extra, stdout=out, stderr=err
    )
    return out.getvalue()


def test_imports_redact_messages_and_raw_lines_and_reimport_adds_nothing(
    tmp_path: Path, make_user: MakeUser
) -> None:
    owner = make_user()
    secret = SECRETS["slack-token"]
    clean = '{"role": "user", "content": "hello",  "id": "u1"}\n'  # odd spacing: kept as is
    dirty = json.dumps({"role": "assistant", "content": f"token {secret}", "id": "a1"}) + "\n"
    unknown = json.dumps({"kind": "note", "body": f"x {secret}"}) + "\n"
    path = _murmur_file(tmp_path, [clean, dirty, unknown])
    _import(path, owner)
    conversation = Conversation.objects.get(owner=owner)
    assert secret not in app_rows_text()
    raws = dict(SourceRecord.objects.values_list("source_key", "raw"))
    assert raws["u1"] == clean.rstrip("\n")
    assert json.loads(raws["a1"]) == {
        "role": "assistant",
        "content": "token " + marker("slack-token"),
        "id": "a1",
    }
    before = (Message.objects.count(), SourceRecord.objects.count(), counts_of(conversation))
    _import(path, owner)
    assert (
        Message.objects.count(),
        SourceRecord.objects.count(),
        counts_of(conversation),
    ) == before
    assert before[2] == {"slack-token": 3}  # content, its raw line, the unknown record


def test_export_import_export_is_a_fixed_point(tmp_path: Path, make_user: MakeUser) -> None:
    first_owner, second_owner = make_user(), make_user()
    lines = [
        json.dumps(
            {"role": "user", "content": f"deploy with {SECRETS['github-token']}", "id": "u1"}
        )
        + "\n",
        json.dumps({"role": "assistant", "content": [{"type": "text", "text": PEM}], "id": "a1"})
        + "\n",
    ]
    _import(_murmur_file(tmp_path, lines), first_owner)
    exported = "".join(export_murmur(Conversation.objects.get(owner=first_owner)))
    again = tmp_path / "again"
    _import(_murmur_file(again, [exported]), second_owner)
    assert "".join(export_murmur(Conversation.objects.get(owner=second_owner))) == exported
    assert SECRETS["github-token"] not in exported and "BEGIN RSA" not in exported


def test_refused_lines_are_reported_without_their_secrets(tmp_path: Path, user: User) -> None:
    secret = SECRETS["aws-access-key"]
    path = _murmur_file(tmp_path, [json.dumps({"role": "user", "content": 5, "id": secret}) + "\n"])
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("import_conversations", str(path), "--owner", user.username, stderr=err)
    assert "must be a string" in err.getvalue()
    assert secret not in err.getvalue()


# --------------------------------------------------------------------------- large and adversarial


@override_settings(MURMUR_CONVERSATIONS={"MAX_CONTENT_BYTES": 16 * 1024 * 1024})
def test_a_ten_megabyte_tool_result_is_stored_redacted(conversation: Conversation) -> None:
    secret = SECRETS["github-token"]
    block = "ordinary build output line with numbers 12345 and paths /usr/lib/x\n" * 1600
    result = (block + secret + "\n") * 100  # about 10 MB, 100 secrets
    assert len(result) >= 10_000_000
    services.save_message(
        conversation=conversation,
        message={"role": "assistant", "content": [{"type": "tool_call", "id": "c", "name": "sh"}]},
    )
    services.save_message(
        conversation=conversation, message={"role": "tool", "tool_call_id": "c", "content": result}
    )
    stored = ToolCall.objects.get(call_id="c").result
    assert isinstance(stored, str)
    assert secret not in stored and stored.count(marker("github-token")) == 100
    assert counts_of(conversation) == {"github-token": 100}


@pytest.mark.parametrize(
    "unit",
    [
        "eyJa.",
        "-----BEGIN RSA PRIVATE KEY-----\n",
        "password=",
        "://a:",
        "aws key ",
        " " * 999 + "x",
    ],
)
def test_adversarial_texts_are_scanned_in_one_linear_pass(unit: str) -> None:
    """Inputs that make backtracking engines quadratic (the library's JWT pattern on Python's
    ``re`` takes seconds for 100 KB of ``eyJa.``): RE2 finishes 2 MB of each, and the result is
    a fixed point. Speed itself is measured by ``python -m bench``, not asserted here."""
    text = (unit * (2_000_000 // len(unit) + 1))[:2_000_000]
    once = redact(text).value
    assert redact(once).value == once


# --------------------------------------------------------------------------- settings


def test_host_patterns_allow_list_detector_choice_and_switching_off(settings: Settings) -> None:
    secret = SECRETS["aws-access-key"]
    settings.MURMUR_CONVERSATIONS = {
        "REDACT": {
            "PATTERNS": {"ticket": r"TCK-[0-9]{6}", "internal-key": r"ik=(?P<secret>[a-f0-9]{16})"},
            "ALLOW": [r"AKIA[A-Z0-9]{12}EXAM"],
            "DETECTORS": ["aws-access-key"],
        }
    }
    value, counts = redact(f"TCK-123456 ik=0123456789abcdef {secret} AKIAABCDEFGHIJKLEXAM ghp_x")
    assert value == (
        "[REDACTED:ticket] ik=[REDACTED:internal-key] [REDACTED:aws-access-key] "
        "AKIAABCDEFGHIJKLEXAM ghp_x"
    )
    assert counts == {"ticket": 1, "internal-key": 1, "aws-access-key": 1}
    settings.MURMUR_CONVERSATIONS = {"REDACT": {"ENABLED": False}}
    assert redact(secret).value == secret


def test_pii_is_off_by_default_and_finds_emails_cards_and_phones_when_on(
    settings: Settings,
) -> None:
    text = "mail ada@example.org, card 4111 1111 1111 1111, call +44 20 7946 0958 today"
    assert redact(text).counts == {}
    settings.MURMUR_CONVERSATIONS = {"REDACT": {"PII": True}}
    value, counts = redact(text)
    assert counts == {"email": 1, "card-number": 1, "phone": 1}
    assert value == (
        "mail [REDACTED:email], card [REDACTED:card-number], call [REDACTED:phone] today"
    )
    assert redact("not a card 4111 1111 1111 1112").counts == {}  # fails the Luhn check


@pytest.mark.parametrize(
    ("redact_setting", "retention", "expected"),
    [
        ({"PATTERNS": {"bad": "(unclosed"}}, None, "murmur_conversations.E020"),
        ({"PATTERNS": {"back": r"(a)\1"}}, None, "murmur_conversations.E020"),
        ({"PATTERNS": {"empty": "x*"}}, None, "murmur_conversations.E020"),
        ({"PATTERNS": {"Bad Name": "x"}}, None, "murmur_conversations.E020"),
        ({"ALLOW": ["(?<=x)y"]}, None, "murmur_conversations.E020"),
        ({"DETECTORS": ["no-such-detector"]}, None, "murmur_conversations.E020"),
        ({"ENABLED": "yes"}, None, "murmur_conversations.E020"),
        ({"PII_REGION": "usa"}, None, "murmur_conversations.E020"),
        ([], None, "murmur_conversations.E020"),
        ({"SURPRISE": 1}, None, "murmur_conversations.W020"),
        ({}, 0, "murmur_conversations.E021"),
        ({}, "30", "murmur_conversations.E021"),
    ],
)
def test_checks_refuse_bad_redaction_and_retention_settings(
    settings: Settings,
    redact_setting: dict[str, object] | list[str],
    retention: int | str | None,
    expected: str,
) -> None:
    settings.MURMUR_CONVERSATIONS = {"REDACT": redact_setting, "RETENTION_DAYS": retention}
    assert [m.id for m in checks.check_settings()] == [expected]


def test_good_settings_pass_the_checks(settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = {
        "REDACT": {"PATTERNS": {"ticket": "TCK-[0-9]+"}, "PII": True, "PII_REGION": "GB"},
        "RETENTION_DAYS": 30,
    }
    assert checks.check_settings() == []


def test_every_builtin_detector_compiles_from_the_installed_library() -> None:
    names = set(redaction.SECRET_DETECTORS)
    assert {*SECRETS, *(case[0] for case in CONTEXTUAL)} <= names
    assert redaction.build({}).stages  # compiles with RE2 (raises otherwise)


# --------------------------------------------------------------------------- admin


def test_the_admin_shows_the_counts(admin_client: Client, conversation: Conversation) -> None:
    services.save_message(
        conversation=conversation, message={"role": "user", "content": SECRETS["npm-token"]}
    )
    page = admin_client.get(f"/admin/murmur_conversations/conversation/{conversation.pk}/change/")
    assert b"npm-token: 1" in page.content
    listing = admin_client.get("/admin/murmur_conversations/redactioncount/?detector=npm-token")
    assert listing.status_code == 200 and str(conversation.pk)[:8].encode() in listing.content
    assert DisplayMessage.objects.filter(content__text=marker("npm-token")).exists()


def test_admin_export_holds_no_secret(admin_client: Client, conversation: Conversation) -> None:
    services.save_message(
        conversation=conversation, message={"role": "user", "content": SECRETS["jwt"]}
    )
    other = services.start_conversation(owner=None, title="other")
    # the stubs' test response type does not allow a streamed one: read it as what a view returns
    response: HttpResponseBase = admin_client.post(
        "/admin/murmur_conversations/conversation/",
        {"action": "export_murmur_jsonl", "_selected_action": [conversation.pk, other.pk]},
    )
    assert isinstance(response, StreamingHttpResponse)  # a zip, streamed from its spool file
    archive = zipfile.ZipFile(io.BytesIO(response.getvalue()))
    assert all(SECRETS["jwt"] not in archive.read(n).decode() for n in archive.namelist())


@given(
    before=st.text(max_size=20),
    after=st.text(max_size=20),
    kind=st.one_of(
        st.none(), st.integers(), st.lists(st.text(max_size=3), max_size=2), st.booleans()
    ),
)
@settings(max_examples=40, deadline=None)
def test_any_text_and_any_type_value_is_redacted_without_raising(
    before: str, after: str, kind: Any
) -> None:
    """Lone surrogates (a raw line's, a caller's) and a ``type`` that is not a string once made
    redaction raise; the secret is still replaced and nothing raises."""
    secret = "ghp_" + "a1B2c3D4e5" * 3 + "F6g7H8i9J0"
    text = f"{before}\ud800 {secret} {after}"
    assert secret not in redact(text).value
    block = {"type": kind, "data": f"token {secret}", "text": text}
    assert secret not in json.dumps(redact(block, record=True).value)
