"""The access logging of the admin (docs/admin.md "The access log"): every admin page that shows
or tests an owner's content writes one entry per conversation it shows to a staff member who does
not own it, before the page is shown."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse

from murmur_conversations import services
from murmur_conversations.exceptions import ConversationNotFound, WriteConflict
from murmur_conversations.models import Conversation

#: What an admin page answers when its view cannot be written to the access log.
UNLOGGED = "The access log could not be written (the database is busy); try again."


def log_views(
    request: HttpRequest, conversation_ids: Iterable[Any], surface: str
) -> HttpResponse | None:
    """One access log entry per conversation in ``conversation_ids`` that the staff member does
    not own (``services.log_access``); None when done, a 503 page when the log could not be
    written (a view that cannot be logged is not shown)."""
    ids = list(dict.fromkeys(conversation_ids))
    if not ids:
        return None
    owners = list(Conversation.objects.filter(pk__in=ids).values_list("pk", "owner_id"))
    try:
        if len(owners) == 1:
            pk, owner_id = owners[0]
            if owner_id != request.user.pk:
                services.log_access(conversation=pk, actor=request.user, surface=surface)
        elif owners:
            services.log_accesses(conversations=owners, actor=request.user, surface=surface)
    except ConversationNotFound:
        return None  # deleted meanwhile: the page will say so
    except WriteConflict:
        return HttpResponse(UNLOGGED, status=503, content_type="text/plain; charset=utf-8")
    return None
