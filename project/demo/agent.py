"""A scripted agent run, written by this project, that drives the services as a real runtime would.

It shows everything the app can display: streamed text (``display_message_delta``), thinking,
parallel tool calls moving pending -> executing -> completed, a failed call, a subagent launched by
a ``Task`` call (a child conversation with its own steps, docs/demo.md "Subagents"), an error notice
and a pending question. ``manage.py demo_agent`` and the demo page's button run it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from murmur_conversations import services
from murmur_conversations.models import Conversation

PROMPT = "Why is the nightly build slower since Tuesday? Check the CI timings and the lockfile."
THINKING = (
    "The user wants a cause, not a guess. Two sources will tell: the CI timing export and the diff "
    "of the lockfile since Tuesday. I can read both at once."
)
SUBAGENT_PROMPT = "Find which build step got slower since Tuesday, from the nightly build logs."
SUBAGENT_REPORT = "`build-wheels` went from 40s to 4m30s; every other step is within 5s of Monday."
FINDINGS = (
    "The nightly build went from 6m40s to 11m05s on Tuesday. The lockfile diff shows that "
    "`image-tools` moved from 2.3 to 3.0, which no longer ships a prebuilt wheel for our Python, "
    "so every build now compiles it from source (about 4 minutes of the 4m25s difference).\n\n"
    "Two ways out: pin `image-tools<3` until the wheel is published, or cache the built wheel "
    "between CI runs. Which do you prefer?"
)


def _stream(
    conversation: Conversation, stream_id: str, text: str, pause: Callable[[], None]
) -> None:
    """Announce ``text`` word by word as ephemeral deltas, the way a model streams."""
    words = text.split(" ")
    for index, word in enumerate(words):
        services.broadcast_delta(
            conversation=conversation, stream_id=stream_id, text=word if index == 0 else " " + word
        )
        pause()


def _subagent(conversation: Conversation, run: int, pause: Callable[..., None]) -> None:
    """The ``Task`` call's subagent: a child conversation that runs, takes two steps (tool
    calls) and reports; its parent's stream hears each change (``child_updated``)."""
    task = f"task-{run}"
    services.update_tool_status(
        conversation=conversation,
        status="executing",
        tool_info={"call_id": task, "display_text": "A subagent profiles the build steps"},
    )
    child = services.start_conversation(
        owner=None, parent=conversation, parent_call_id=task, title="Profile the build steps"
    )
    services.set_status(conversation=child, status="running")
    services.save_message(
        conversation=child,
        message={"role": "user", "content": SUBAGENT_PROMPT, "id": f"demo-sub-prompt-{run}"},
    )
    for step, (name, arguments, output) in enumerate(
        (
            ("read_build_log", {"night": "monday"}, "build-wheels 40s · tests 3m10s · lint 25s"),
            ("read_build_log", {"night": "tuesday"}, "build-wheels 4m30s · tests 3m12s · lint 24s"),
        )
    ):
        call = f"sub-{step}-{run}"
        pause()
        services.save_message(
            conversation=child,
            message={
                "role": "assistant",
                "id": f"demo-sub-call-{step}-{run}",
                "content": [{"type": "tool_call", "id": call, "name": name, "input": arguments}],
            },
        )
        pause()
        services.save_message(
            conversation=child,
            message={
                "role": "tool",
                "tool_call_id": call,
                "id": f"demo-sub-result-{step}-{run}",
                "content": output,
            },
        )
    services.save_message(
        conversation=child,
        message={"role": "assistant", "content": SUBAGENT_REPORT, "id": f"demo-sub-report-{run}"},
    )
    services.set_status(conversation=child, status="idle")
    services.save_message(
        conversation=conversation,
        message={
            "role": "tool",
            "tool_call_id": task,
            "id": f"demo-task-{run}",
            "content": SUBAGENT_REPORT,
        },
    )


def run_demo_agent(
    *, conversation: Conversation, delay: float = 0.15, sleep: Callable[[float], Any] = time.sleep
) -> None:
    """Play the scripted run into ``conversation``. ``delay`` is the pause in seconds between
    steps (0 for none; streamed words pause a fifth of it). Every step is a service call."""

    def pause(factor: float = 1.0) -> None:
        if delay > 0:
            sleep(delay * factor)

    def word_pause() -> None:
        pause(0.2)

    run = time.time_ns()
    services.set_status(conversation=conversation, status="running")
    services.save_message(
        conversation=conversation,
        message={"role": "user", "content": PROMPT, "id": f"demo-user-{run}"},
    )
    pause()
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "id": f"demo-plan-{run}",
            "content": [
                {"type": "thinking", "text": THINKING},
                {
                    "type": "text",
                    "text": "I'll read the CI timings and the lockfile diff in parallel.",
                },
                {
                    "type": "tool_call",
                    "id": f"ci-{run}",
                    "name": "fetch_ci_timings",
                    "input": {"pipeline": "nightly", "days": 7},
                },
                {
                    "type": "tool_call",
                    "id": f"lock-{run}",
                    "name": "git_diff",
                    "input": {"path": "requirements.lock", "since": "tuesday"},
                },
                {
                    "type": "tool_call",
                    "id": f"cache-{run}",
                    "name": "read_cache_stats",
                    "input": {"bucket": "ci-cache"},
                },
                {
                    "type": "tool_call",
                    "id": f"task-{run}",
                    "name": "Task",
                    "input": {"description": "Profile the build steps", "prompt": SUBAGENT_PROMPT},
                },
            ],
        },
    )
    pause()
    for call, display_text in (
        (f"ci-{run}", "Fetching 7 days of nightly timings"),
        (f"lock-{run}", "Diffing requirements.lock since Tuesday"),
        (f"cache-{run}", "Reading the ci-cache bucket statistics"),
    ):
        services.update_tool_status(
            conversation=conversation,
            status="executing",
            tool_info={"call_id": call, "display_text": display_text},
        )
    _subagent(conversation, run, pause)
    services.save_message(
        conversation=conversation,
        message={
            "role": "tool",
            "tool_call_id": f"ci-{run}",
            "id": f"demo-ci-{run}",
            "content": "nightly: mon 6m40s, tue 11m02s, wed 11m05s, thu 11m01s",
        },
    )
    pause()
    services.save_message(
        conversation=conversation,
        message={
            "role": "tool",
            "tool_call_id": f"cache-{run}",
            "id": f"demo-cache-{run}",
            "is_error": True,
            "content": "PermissionError: the CI token cannot read bucket 'ci-cache'",
        },
    )
    pause()
    services.save_message(
        conversation=conversation,
        message={
            "role": "tool",
            "tool_call_id": f"lock-{run}",
            "id": f"demo-lock-{run}",
            "content": "-image-tools==2.3.1\n+image-tools==3.0.0",
        },
    )
    services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="error",
        content={
            "text": "read_cache_stats failed: the CI token lacks read access to ci-cache.",
            "error_type": "tool_error",
        },
    )
    pause()
    stream_id = f"answer-{run}"
    _stream(conversation, stream_id, FINDINGS, word_pause)
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "id": f"demo-answer-{run}",
            "stream_id": stream_id,
            "content": [{"type": "text", "text": FINDINGS}],
        },
    )
    services.set_status(
        conversation=conversation,
        status="paused",
        pending_ask={
            "question": "Pin image-tools<3, or cache the built wheel between CI runs?",
            "tool": "ask_user",
            "component": {"id": "choice"},
            "pauseData": {"options": ["pin", "cache"]},
        },
    )
