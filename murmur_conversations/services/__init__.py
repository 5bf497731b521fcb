"""The write path (docs/write-path.md): the only code that writes rows.

Every function is atomic, locks the conversation row while it assigns numbers, takes keyword-only
arguments, accepts a ``Conversation`` or its id, takes exactly one new ``event_seq`` when it changes
the conversation, and sends its signals only after commit. Async callers use the ``a``-prefixed
wrappers (``sync_to_async``). Behaviour follows the sagents ``DisplayMessagePersistence`` (display
rows, tool status lifecycle, synthetic messages), the murmur conversation record (append-only,
de-duplicated by id) and agentfootprint's session store (owner rule, pending ask).

The verbs live in small modules (``conversations``, ``appending``, ``tools``, ``runs``,
``deletion``); import them from here.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async

from murmur_conversations.services._common import ALLOWED_MOVES, UNSET
from murmur_conversations.services.appending import (
    save_message,
    save_messages,
    save_source_records,
    save_synthetic_message,
)
from murmur_conversations.services.conversations import (
    broadcast_delta,
    set_status,
    start_conversation,
    update_conversation,
)
from murmur_conversations.services.deletion import delete_conversation, purge_conversations
from murmur_conversations.services.runs import (
    MAX_ANSWER_CHARS,
    answer_pending_ask,
    cancel_run,
    recover_interrupted,
)
from murmur_conversations.services.tools import resolve_tool_result, update_tool_status

__all__ = [
    "ALLOWED_MOVES",
    "MAX_ANSWER_CHARS",
    "UNSET",
    "aanswer_pending_ask",
    "abroadcast_delta",
    "acancel_run",
    "adelete_conversation",
    "answer_pending_ask",
    "aresolve_tool_result",
    "asave_message",
    "asave_messages",
    "asave_synthetic_message",
    "aset_status",
    "astart_conversation",
    "aupdate_conversation",
    "aupdate_tool_status",
    "broadcast_delta",
    "cancel_run",
    "delete_conversation",
    "purge_conversations",
    "recover_interrupted",
    "resolve_tool_result",
    "save_message",
    "save_messages",
    "save_source_records",
    "save_synthetic_message",
    "set_status",
    "start_conversation",
    "update_conversation",
    "update_tool_status",
]

astart_conversation = sync_to_async(start_conversation)
asave_message = sync_to_async(save_message)
asave_messages = sync_to_async(save_messages)
aupdate_tool_status = sync_to_async(update_tool_status)
aresolve_tool_result = sync_to_async(resolve_tool_result)
asave_synthetic_message = sync_to_async(save_synthetic_message)
aupdate_conversation = sync_to_async(update_conversation)
aset_status = sync_to_async(set_status)
acancel_run = sync_to_async(cancel_run)
aanswer_pending_ask = sync_to_async(answer_pending_ask)
adelete_conversation = sync_to_async(delete_conversation)
abroadcast_delta = sync_to_async(broadcast_delta)
