"""The write path (docs/write-path.md): the only code that writes rows.

Every service takes keyword-only arguments and accepts a ``Conversation`` or its id where it takes
a conversation. The services that change one conversation (``start_conversation``,
``save_message``, ``save_messages``, ``save_synthetic_message``, ``update_tool_status``,
``resolve_tool_result``, ``update_conversation``, ``set_status``, ``cancel_run``, ``set_feedback``,
``clear_feedback``, ``delete_conversation``) are atomic, lock the conversation row while they assign numbers, take
exactly one new ``event_seq`` when they change the conversation, and send their signals only after
commit; nothing is written when they raise. ``save_source_records`` is atomic and locks too, but
takes no event_seq and sends no signal; so do ``create_share`` and ``revoke_share`` (a share link
changes nothing people see in the conversation; ``revoke_share`` sends ``share_revoked``).
``fork_conversation`` creates a new conversation in one transaction under the original's lock and
writes nothing of the original. Five are not one transaction:

- ``broadcast_delta`` writes nothing: its ``delta`` signal is sent at once and never stored;
- ``prune_frame_log`` deletes the frame log's old rows in one statement of its own (docs/websocket.md
  "The frame log");
- ``purge_conversations`` deletes in batches, one transaction each, skipping held conversations;
- ``recover_interrupted`` recovers each conversation in its own locked transaction;
- ``reprice_usage`` re-prices usage rows in batches, one transaction each.

An error part way through the last three leaves the conversations already done as they are.

Async callers use the ``a``-prefixed wrappers (``sync_to_async``), one per service. Behaviour
follows the sagents ``DisplayMessagePersistence`` (display rows, tool status lifecycle, synthetic
messages), the murmur conversation record (append-only, de-duplicated by id) and agentfootprint's
session store (owner rule, pending ask).

Import the services from here. The modules of this package (the verbs in ``conversations``,
``appending``, ``tools``, ``runs``, ``deletion``, ``sharing``, ``forking``, ``feedback``; the
machinery in ``writing``, ``lifecycle``, ``plan``, ``backends``, ``organising``, ``copying``) are private to
it and may change in any release.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async

from murmur_conversations.services.appending import (
    save_message,
    save_messages,
    save_source_records,
    save_synthetic_message,
)
from murmur_conversations.services.conversations import (
    UNSET,
    broadcast_delta,
    set_status,
    start_conversation,
    update_conversation,
)
from murmur_conversations.services.deletion import delete_conversation, purge_conversations
from murmur_conversations.services.feedback import (
    MAX_COMMENT_CHARS,
    clear_feedback,
    set_feedback,
)
from murmur_conversations.services.forking import fork_conversation, link_fork
from murmur_conversations.services.importing import (
    forget_imported_source,
    remember_imported_source,
)
from murmur_conversations.services.lifecycle import ALLOWED_MOVES
from murmur_conversations.services.organising import MAX_TAG_CHARS, MAX_TAGS
from murmur_conversations.services.pricing import reprice_usage
from murmur_conversations.services.retention import (
    MAX_HOLD_REASON,
    log_access,
    log_accesses,
    log_agent_reads,
    place_hold,
    release_hold,
)
from murmur_conversations.services.runs import (
    MAX_ANSWER_CHARS,
    answer_pending_ask,
    cancel_run,
    recover_interrupted,
)
from murmur_conversations.services.sharing import (
    MAX_SHARE_SECONDS,
    create_share,
    revoke_share,
)
from murmur_conversations.services.tools import resolve_tool_result, update_tool_status
from murmur_conversations.services.writing import prune_frame_log

__all__ = [
    "ALLOWED_MOVES",
    "MAX_ANSWER_CHARS",
    "MAX_COMMENT_CHARS",
    "MAX_HOLD_REASON",
    "MAX_SHARE_SECONDS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "UNSET",
    "aanswer_pending_ask",
    "abroadcast_delta",
    "acancel_run",
    "aclear_feedback",
    "acreate_share",
    "adelete_conversation",
    "aforget_imported_source",
    "afork_conversation",
    "alink_fork",
    "alog_access",
    "alog_accesses",
    "alog_agent_reads",
    "answer_pending_ask",
    "aplace_hold",
    "aprune_frame_log",
    "apurge_conversations",
    "arecover_interrupted",
    "arelease_hold",
    "aremember_imported_source",
    "areprice_usage",
    "aresolve_tool_result",
    "arevoke_share",
    "asave_message",
    "asave_messages",
    "asave_source_records",
    "asave_synthetic_message",
    "aset_feedback",
    "aset_status",
    "astart_conversation",
    "aupdate_conversation",
    "aupdate_tool_status",
    "broadcast_delta",
    "cancel_run",
    "clear_feedback",
    "create_share",
    "delete_conversation",
    "forget_imported_source",
    "fork_conversation",
    "link_fork",
    "log_access",
    "log_accesses",
    "log_agent_reads",
    "place_hold",
    "prune_frame_log",
    "purge_conversations",
    "recover_interrupted",
    "release_hold",
    "remember_imported_source",
    "reprice_usage",
    "resolve_tool_result",
    "revoke_share",
    "save_message",
    "save_messages",
    "save_source_records",
    "save_synthetic_message",
    "set_feedback",
    "set_status",
    "start_conversation",
    "update_conversation",
    "update_tool_status",
]

astart_conversation = sync_to_async(start_conversation)
asave_message = sync_to_async(save_message)
asave_messages = sync_to_async(save_messages)
asave_source_records = sync_to_async(save_source_records)
aupdate_tool_status = sync_to_async(update_tool_status)
aresolve_tool_result = sync_to_async(resolve_tool_result)
asave_synthetic_message = sync_to_async(save_synthetic_message)
aupdate_conversation = sync_to_async(update_conversation)
aset_status = sync_to_async(set_status)
acancel_run = sync_to_async(cancel_run)
aanswer_pending_ask = sync_to_async(answer_pending_ask)
adelete_conversation = sync_to_async(delete_conversation)
apurge_conversations = sync_to_async(purge_conversations)
aprune_frame_log = sync_to_async(prune_frame_log)
arecover_interrupted = sync_to_async(recover_interrupted)
areprice_usage = sync_to_async(reprice_usage)
abroadcast_delta = sync_to_async(broadcast_delta)
acreate_share = sync_to_async(create_share)
arevoke_share = sync_to_async(revoke_share)
afork_conversation = sync_to_async(fork_conversation)
alink_fork = sync_to_async(link_fork)
aset_feedback = sync_to_async(set_feedback)
aclear_feedback = sync_to_async(clear_feedback)
aremember_imported_source = sync_to_async(remember_imported_source)
aforget_imported_source = sync_to_async(forget_imported_source)
aplace_hold = sync_to_async(place_hold)
arelease_hold = sync_to_async(release_hold)
alog_access = sync_to_async(log_access)
alog_accesses = sync_to_async(log_accesses)
alog_agent_reads = sync_to_async(log_agent_reads)
