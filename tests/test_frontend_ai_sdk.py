"""The ``vercel-ui`` export checked by the AI SDK itself (the ``ai`` npm package, v5): every list
passes its ``validateUIMessages`` and converts with ``convertToModelMessages``.

The package is installed with npm into a cache folder outside the repository
(``MURMUR_NPM_CACHE``, default ``~/.cache/murmur-conversations/ai-sdk-5``) on first use; the test
skips, saying why, when node or npm is missing or the install fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from murmur_conversations import services
from murmur_conversations.frontends.vercel_ui import to_vercel_ui
from tests.frontend_helpers import conversations
from tests.helpers import MakeConversation
from tests.import_helpers import export

AI_VERSION = "5"
CHECK = """
const { validateUIMessages, convertToModelMessages } = require("ai");
let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", async () => {
  const problems = [];
  for (const [index, messages] of JSON.parse(input).entries()) {
    try {
      const valid = await validateUIMessages({ messages });
      convertToModelMessages(valid);
    } catch (error) {
      problems.push({ index, error: String(error && error.message || error).slice(0, 2000) });
    }
  }
  process.stdout.write(JSON.stringify(problems));
});
"""


def ai_sdk() -> Path:
    """The folder holding ``node_modules/ai`` (v5), installed on first use; skips without npm."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to check the vercel-ui export with the AI SDK")
    folder = Path(
        os.environ.get("MURMUR_NPM_CACHE")
        or Path.home() / ".cache" / "murmur-conversations" / f"ai-sdk-{AI_VERSION}"
    )
    package = folder / "node_modules" / "ai" / "package.json"
    if not package.exists() or not json.loads(package.read_text())["version"].startswith("5."):
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(folder),
                f"ai@{AI_VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 or not package.exists():
            pytest.skip(f"npm could not install ai@{AI_VERSION}: {done.stderr[-500:]}")
    return folder


def check(folder: Path, lists: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["node", "-e", CHECK],
        input=json.dumps(lists),
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(folder / "node_modules")},
    )
    assert done.returncode == 0, done.stderr
    problems: list[dict[str, Any]] = json.loads(done.stdout)
    return problems


def test_generated_exports_pass_the_ai_sdks_validation() -> None:
    folder = ai_sdk()
    lists: list[list[dict[str, Any]]] = []

    @settings(max_examples=40, derandomize=True, database=None, deadline=None)
    @given(record=conversations())
    def collect(record: list[dict[str, Any]]) -> None:
        lists.append(to_vercel_ui(record, conversation_id="c"))

    collect()
    assert len(lists) >= 20
    assert check(folder, lists) == []


def test_a_bad_list_is_refused_by_the_ai_sdk() -> None:
    """The check can fail: a tool part without its toolCallId is not a UIMessage."""
    folder = ai_sdk()
    bad = [
        {
            "id": "a",
            "role": "assistant",
            "parts": [{"type": "tool-x", "state": "input-available", "input": {}}],
        }
    ]
    assert [p["index"] for p in check(folder, [bad])] == [0]


@pytest.mark.django_db
def test_an_exported_conversation_passes_the_ai_sdks_validation(
    make_conversation: MakeConversation,
) -> None:
    folder = ai_sdk()
    conversation = make_conversation()
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "url": "https://example.com/a.png"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "text": "plan", "signature": "sig"},
                    {"type": "tool_call", "id": "c1", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_call", "id": "c2", "name": "read", "input": {"path": "b"}},
                    {"type": "tool_call", "id": "c3", "name": "bash", "input": {}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "text"},
            {"role": "tool", "tool_call_id": "c2", "content": "no such file", "is_error": True},
            {"role": "tool", "tool_call_id": "orphan", "content": "?"},
            {
                "role": "assistant",
                "content": "Done.",
                "tool_calls": [
                    {
                        "id": "c4",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                    }
                ],
            },
        ],
    )
    listed = json.loads(export(conversation, "--format", "vercel-ui"))
    assert check(folder, [listed]) == []
    states = [p.get("state") for m in listed for p in m["parts"] if "state" in p]
    assert states == [
        "output-available",
        "output-error",
        "input-available",
        "output-available",
        "input-available",
    ]
