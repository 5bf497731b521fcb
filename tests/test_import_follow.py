"""``import_conversations --follow`` (docs/formats.md): a live stream from stdin until
it ends, or a file waiting for appends until interrupted. The wait at the end of the file is
injected (``follow_wait``), so the test appends the next line there: no sleeps, no threads."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from django.contrib.auth.models import User

from murmur_conversations import signals
from murmur_conversations.management.commands import import_conversations
from murmur_conversations.models import Conversation, Message, ToolCall
from murmur_conversations.redaction import last_word
from tests.import_helpers import Appender, follow, run

pytestmark = pytest.mark.django_db

MUSE = "muse_exec_jsonl/meta_tool_use.jsonl"  # in the real-log corpus
#: Our own muse journal (tests/fixtures/README.md), for the tests a bare clone runs.
OUR_MUSE = Path(__file__).resolve().parent / "fixtures" / "muse" / "notes_run.jsonl"


@pytest.fixture
def deltas() -> Iterator[list[tuple[str, str]]]:
    """The ``delta`` signals sent (``broadcast_delta``), as ``(stream_id, text)``."""
    got: list[tuple[str, str]] = []

    def receive(sender: object, *, stream_id: str, text: str, **kwargs: object) -> None:
        got.append((stream_id, text))

    signals.delta.connect(receive)
    yield got
    signals.delta.disconnect(receive)


@pytest.fixture(autouse=True)
def shared_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Most tests run as with a shared layer; one test sets the process-local case."""
    monkeypatch.setattr(import_conversations, "layer_is_process_local", lambda: False)


def test_follow_a_file_line_by_line(
    corpus: Path, tmp_path: Path, user: User, deltas: list[tuple[str, str]]
) -> None:
    lines = (corpus / MUSE).read_bytes().splitlines(keepends=True)
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"")
    wait = Appender(path, lines, deltas)
    code, out, err = follow(path, user, wait)
    assert (code, err) == (0, "")
    assert "(muse): 1 conversation(s), 6 message(s) added of 6 read" in out
    by_lines = {written: (messages, sent) for written, messages, sent in wait.seen}
    assert by_lines[3] == (0, 0)  # the prompt is line 4
    assert by_lines[4] == (1, 0)  # stored as soon as its line arrived
    assert by_lines[26] == (2, 0)  # line 26 names the write_file call: its card exists
    assert by_lines[29] == (2, 1)  # tool output streamed (a delta), not stored
    assert by_lines[31] == (3, 1)  # the tool result
    assert by_lines[76] == (5, 6)  # four answer deltas seen, the answer not stored yet
    assert by_lines[91] == (6, 6)  # the terminal: the answer, once
    assert [m for _, m, _ in wait.seen] == sorted(m for _, m, _ in wait.seen)
    answer = [text for stream, text in deltas if stream == "63a61abc-2c10-40dd-ab6d-ef00d48a5a29"]
    last = Message.objects.order_by("position").last()
    assert last is not None
    text = last.content[0]["text"]
    # a last word that may begin a secret waits for more text (docs/write-path.md "Redaction")
    assert "".join(answer) in (text, text[: last_word(text)])
    assert {c.status for c in ToolCall.objects.all()} == {"completed"}
    assert Conversation.objects.get().status == "idle"


def test_follow_our_muse_journal_line_by_line(
    tmp_path: Path, user: User, deltas: list[tuple[str, str]]
) -> None:
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"")
    wait = Appender(path, OUR_MUSE.read_bytes().splitlines(keepends=True), deltas)
    code, out, err = follow(path, user, wait)
    assert (code, err) == (0, "")
    assert "(muse): 1 conversation(s), 7 message(s) added of 7 read" in out
    by_lines = {written: (messages, sent) for written, messages, sent in wait.seen}
    assert by_lines[3] == (0, 0)
    assert by_lines[4] == (1, 0)  # the prompt, stored as soon as its line arrived
    assert by_lines[15] == (2, 0)  # the list_dir call's card, once its key names the call
    assert by_lines[18] == (2, 1)  # its output streamed, not stored
    assert by_lines[20] == (3, 1)  # its result
    assert by_lines[24] == (5, 2)  # spell_check: call, output, failed result
    assert by_lines[35] == (6, 5)  # three answer deltas, the answer not stored yet
    assert by_lines[38] == (7, 5)  # the terminal: the answer, once
    answer = [text for stream, text in deltas if stream == "c0de0001-1111-4222-8333-444455556666"]
    last = Message.objects.order_by("position").last()
    assert last is not None
    assert "".join(answer) == last.content[0]["text"]
    statuses = sorted(ToolCall.objects.values_list("status", flat=True))
    assert statuses == ["cancelled", "completed", "failed"]
    assert Conversation.objects.get().status == "idle"


def test_follow_joins_a_line_written_in_two_parts(
    tmp_path: Path, user: User, deltas: list[tuple[str, str]]
) -> None:
    line = json.dumps({"role": "user", "content": "hello", "id": "m1"}).encode() + b"\n"
    path = tmp_path / "conversation.jsonl"
    path.write_bytes(line[:10])
    wait = Appender(path, [line[10:]], deltas)
    code, _out, err = follow(path, user, wait, "--format", "murmur")
    assert (code, err) == (0, "")
    assert Message.objects.get().message_id == "m1"
    assert wait.seen == [(0, 0, 0), (1, 1, 0)]


def test_interrupted_with_a_partial_line_reports_it(
    tmp_path: Path, user: User, deltas: list[tuple[str, str]]
) -> None:
    good = json.dumps({"role": "user", "content": "hello", "id": "m1"})
    path = tmp_path / "conversation.jsonl"
    path.write_bytes(good.encode() + b'\n{"role":"assis')
    code, out, err = follow(path, user, Appender(path, [], deltas), "--format", "murmur")
    assert code == 1
    assert "conversation.jsonl:2: torn last line" in err
    assert "1 message(s) added" in out
    assert Message.objects.count() == 1


def test_follow_stdin_until_it_ends(
    corpus: Path, user: User, deltas: list[tuple[str, str]]
) -> None:
    code, out, err = run(
        "-", "--owner", user.username, "--follow", stdin=io.BytesIO((corpus / MUSE).read_bytes())
    )
    assert (code, err) == (0, "")
    assert "<stdin> (muse): 1 conversation(s), 6 message(s) added" in out
    assert len(deltas) == 6  # four answer deltas, two tool outputs
    assert ToolCall.objects.filter(status="completed").count() == 2
    code, out, _ = run(
        "-", "--owner", user.username, "--follow", stdin=io.BytesIO((corpus / MUSE).read_bytes())
    )
    assert code == 0
    assert "0 message(s) added of 6 read" in out


@pytest.mark.parametrize(
    ("name", "messages", "calls", "children"),
    [
        # the subagent (parent_tool_use_id) is a child: 3 messages, 1 call of its own
        ("claude_code_stream_json/explore_count_files.jsonl", 3, 1, [(3, 1)]),
        ("codex_exec_jsonl/multi_command.jsonl", 9, 3, []),
    ],
)
def test_follow_other_live_streams(
    corpus: Path,
    user: User,
    name: str,
    messages: int,
    calls: int,
    children: list[tuple[int, int]],
) -> None:
    data = (corpus / name).read_bytes()
    code, _, err = run("-", "--owner", user.username, "--follow", stdin=io.BytesIO(data))
    assert (code, err) == (0, "")
    top = Conversation.objects.get(parent__isnull=True)
    assert Message.objects.filter(conversation=top).count() == messages
    assert ToolCall.objects.filter(conversation=top, status="completed").count() == calls
    found = [(c.record_length, c.tool_call_count) for c in top.children.all()]
    assert found == children
    # live, the subagent ran while its lines came and is done when its call's result came
    assert {c.status for c in top.children.all()} <= {"idle"}


def test_follow_refuses_a_line_that_is_not_utf8_and_keeps_the_rest(
    user: User, deltas: list[tuple[str, str]]
) -> None:
    data = (
        b'{"role":"user","content":"a","id":"m1"}\n'
        b'{"role":"user","content":"\xe9","id":"m2"}\n'
        b'{"role":"assistant","content":"b","id":"m3"}\n'
    )
    code, _out, err = run("-", "--owner", user.username, "--follow", stdin=io.BytesIO(data))
    assert code == 1
    assert "<stdin>:2: line 2 is not UTF-8 (byte 0xe9" in err
    assert [m.message_id for m in Message.objects.order_by("position")] == ["m1", "m3"]


def test_follow_dry_run_and_empty_or_unknown_streams(user: User) -> None:
    stdin = io.BytesIO(OUR_MUSE.read_bytes())
    code, out, _ = run("-", "--owner", user.username, "--follow", "--dry-run", stdin=stdin)
    assert code == 0
    assert "7 message(s) readable" in out
    assert not Conversation.objects.exists()
    code, _, err = run("-", "--owner", user.username, "--follow", stdin=io.BytesIO(b""))
    assert code == 2
    code, _, err = run("-", "--owner", user.username, "--follow", stdin=io.BytesIO(b'{"x":1}\n'))
    assert code == 2
    assert "cannot tell the format" in err
    assert not Conversation.objects.exists()


def test_process_local_layer_is_said_on_stderr(monkeypatch: pytest.MonkeyPatch, user: User) -> None:
    monkeypatch.setattr(import_conversations, "layer_is_process_local", lambda: True)
    stdin = io.BytesIO(OUR_MUSE.read_bytes())
    code, _, err = run("-", "--owner", user.username, "--follow", stdin=stdin)
    assert code == 0
    assert "database tailing" in err
    assert "CHANNEL_LAYERS" in err  # the Django setting, not a variable of one host


def interrupt() -> NoReturn:
    raise KeyboardInterrupt


@pytest.mark.parametrize("forced", ["codex", "claude-code", "openai"])
@pytest.mark.parametrize("source", ["stdin", "file"])
def test_follow_refuses_a_plainly_wrong_forced_format(
    tmp_path: Path, user: User, source: str, forced: str
) -> None:
    """The same refusal as without ``--follow`` (test_import): one detection path for both."""
    args: list[object]
    if source == "stdin":
        args, stdin = ["-"], io.BytesIO(OUR_MUSE.read_bytes())
    else:
        path = tmp_path / "live.jsonl"
        path.write_bytes(OUR_MUSE.read_bytes())
        args, stdin = [path], None
    code, _, err = run(
        *args, "--owner", user.username, "--follow", "--format", forced, stdin=stdin,
        follow_wait=interrupt,
    )  # fmt: skip
    assert code == 2
    assert f"looks like muse, not {forced}" in err
    assert not Conversation.objects.exists()
