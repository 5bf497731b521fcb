"""Helpers of the frontend-shape tests: hypothesis conversations with text, reasoning, tool
calls (some failing) and images."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

words = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
)
images = st.sampled_from(
    [
        {"type": "image", "url": "https://example.com/cat.png"},
        {"type": "image", "data": PIXEL, "mime_type": "image/png"},
    ]
)
arguments = st.dictionaries(
    st.sampled_from(["path", "cmd", "n"]), words | st.integers(0, 9), max_size=2
)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A record of user turns (text, maybe an image), assistant turns (thinking with or without
    a signature, text, tool calls) and the calls' results, some of them errors."""
    record: list[dict[str, Any]] = []
    counter = iter(range(10_000))
    for _turn in range(draw(st.integers(1, 3))):
        user_blocks: list[dict[str, Any]] = [{"type": "text", "text": draw(words)}]
        if draw(st.booleans()):
            user_blocks.append(draw(images))
        content: Any = user_blocks if len(user_blocks) > 1 else user_blocks[0]["text"]
        record.append({"role": "user", "id": f"u{next(counter)}", "content": content})
        blocks: list[dict[str, Any]] = []
        if draw(st.booleans()):
            thinking = {"type": "thinking", "text": draw(words)}
            if draw(st.booleans()):
                thinking["signature"] = draw(words)
            blocks.append(thinking)
        if draw(st.booleans()):
            blocks.append({"type": "text", "text": draw(words)})
        calls = [f"call{next(counter)}" for _ in range(draw(st.integers(0, 2)))]
        for call in calls:
            blocks.append(
                {
                    "type": "tool_call",
                    "id": call,
                    "name": draw(st.sampled_from(["bash", "read"])),
                    "input": draw(arguments),
                }
            )
        if not blocks:
            blocks.append({"type": "text", "text": draw(words)})
        record.append({"role": "assistant", "id": f"a{next(counter)}", "content": blocks})
        for call in calls:
            record.append(
                {
                    "role": "tool",
                    "id": f"r{next(counter)}",
                    "tool_call_id": call,
                    "content": draw(words),
                    "is_error": draw(st.booleans()),
                }
            )
    return record
