"""The conversation admin: find a conversation, read its transcript as cards, delete it through
``services.delete_conversation`` (docs/admin.md)."""

from __future__ import annotations

import tempfile
import uuid
import zipfile
from collections.abc import Iterable
from typing import Any, Final

from django.contrib import admin, messages
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.admin.options import get_content_type_for_model
from django.contrib.admin.views.main import SEARCH_VAR
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.db.models import BooleanField, Case, Exists, OuterRef, Q, QuerySet, Value, When
from django.http import (
    FileResponse,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from murmur_conversations import services
from murmur_conversations.admin.access import log_views
from murmur_conversations.admin.base import ReadOnlyAdmin, badge, pre
from murmur_conversations.admin.cards import TRANSCRIPT_PAGE_SIZE, cards_for
from murmur_conversations.admin.filters import (
    FeedbackFilter,
    HeldFilter,
    TagFilter,
    ToolStatusFilter,
)
from murmur_conversations.exceptions import (
    ConversationHeld,
    ConversationNotFound,
    InvalidContent,
    InvalidSearch,
    WriteConflict,
)
from murmur_conversations.exporters import export_murmur
from murmur_conversations.models import (
    AccessSurface,
    Conversation,
    DisplayMessage,
    Feedback,
    Hold,
    Rating,
    RedactionCount,
)
from murmur_conversations.representations import conversation_usage
from murmur_conversations.search import matching_conversations, parse_query
from murmur_conversations.selectors import feedback_counts, held_condition

#: Bytes of a multi-conversation export kept in memory before it spills to a temporary file.
EXPORT_SPOOL_BYTES: Final = 8 * 1024 * 1024
#: Children listed on a parent's page; the rest are a link to the list of its children.
CHILDREN_SHOWN: Final = 50


def _has_feedback(rating: int) -> Exists:
    """Whether the outer conversation has feedback of ``rating`` (an ``EXISTS`` on the
    ``(conversation, rating)`` index: the list never counts)."""
    return Exists(Feedback.objects.filter(conversation=OuterRef("pk"), rating=rating))


def _search_uuid(term: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(term)
    except ValueError:
        return None


def _owner_lookup(term: str) -> Q:
    """Users whose ``USERNAME_FIELD`` or email field equals ``term`` exactly."""
    user_model = get_user_model()
    query = Q(**{user_model.USERNAME_FIELD: term})
    email_field = user_model.get_email_field_name()
    try:
        user_model._meta.get_field(email_field)
    except FieldDoesNotExist:
        return query
    return query | Q(**{email_field: term})


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    """Conversations: read-only, searchable by exact id, exact owner (username or email), title
    prefix and full text (``search.matching_conversations``); filtered by status, tool-call status
    and dates; shows token usage and cost; the change page shows the transcript as cards,
    ``TRANSCRIPT_PAGE_SIZE`` display rows a page."""

    list_display = (
        "id",
        "title_short",
        "owner_link",
        "status_badge",
        "pending_badge",
        "held_badge",
        "record_length",
        "transcript_count",
        "last_seq",
        "input_tokens",
        "output_tokens",
        "cost",
        "organised",
        "feedback_marks",
        "saved_at",
    )
    list_display_links = ("id",)
    list_select_related = ("owner",)
    list_filter = (
        "status",
        ToolStatusFilter,
        HeldFilter,
        FeedbackFilter,
        "pinned",
        "archived",
        TagFilter,
        ("saved_at", admin.DateFieldListFilter),
        ("created_at", admin.DateFieldListFilter),
    )
    list_defer = ("metadata", "pending_ask")
    link_lookups = frozenset({"owner__id__exact", "parent__id__exact"})
    search_fields = ("=id",)  # shows the search box; get_search_results does the work
    search_help_text = (
        "Exact conversation id, exact owner username or email, title prefix, or words in the "
        'title or the messages ("a phrase", -excluded, or).'
    )
    raw_id_fields = ("owner", "forked_from")
    fieldsets = (
        (None, {"fields": ("id", "title", "owner", "status", "pending_ask_pretty")}),
        (
            "Counters",
            {
                "fields": (
                    "record_length",
                    "transcript_count",
                    "last_seq",
                    "last_event_seq",
                    "pending_ask_event_seq",
                )
            },
        ),
        (
            "Subagents",
            {"fields": ("parent_link", "parent_call_id", "children_list")},
        ),
        (
            "Usage",
            {
                "fields": (
                    "input_tokens",
                    "output_tokens",
                    "cache_read_tokens",
                    "cache_write_tokens",
                    "cache_write_1h_tokens",
                    "reasoning_tokens",
                    "cost",
                    "usage_by_model_pretty",
                )
            },
        ),
        ("Source", {"fields": ("source", "external_id", "created_at", "saved_at", "rows")}),
        (
            "Organising and feedback",
            {
                "fields": (
                    "pinned_text",
                    "archived_text",
                    "tag_links",
                    "forked_from",
                    "forked_at_seq",
                    "feedback_total",
                )
            },
        ),
        ("Metadata", {"fields": ("metadata_pretty",), "classes": ("collapse",)}),
        ("Keeping", {"fields": ("hold_state", "redactions")}),
    )
    readonly_fields = (
        "pending_ask_pretty",
        "metadata_pretty",
        "rows",
        "hold_state",
        "redactions",
        "pinned_text",
        "archived_text",
        "tag_links",
        "feedback_total",
        "parent_link",
        "children_list",
    )
    actions = ("export_murmur_jsonl", "delete_selected")
    list_surface = AccessSurface.ADMIN_LIST
    page_surface = AccessSurface.ADMIN

    def conversations_of(self, rows: Iterable[Any]) -> list[Any]:
        """The rows are conversations: their ids."""
        return [row.pk for row in rows]

    def surface_of_list(self, request: HttpRequest) -> str | None:
        """``admin-search`` when the list is searched (``?q=``), else ``admin-list``."""
        searched = request.GET.get(SEARCH_VAR, "").strip()
        return AccessSurface.ADMIN_SEARCH if searched else AccessSurface.ADMIN_LIST

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        """All conversations, with their owners."""
        return super().get_queryset(request).select_related("owner")

    def lean_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Without metadata and pending ask, with a ``has_pending`` flag instead, and whether each
        row has thumbs up and down (``EXISTS`` on the ``(conversation, rating)`` index)."""
        lean: QuerySet[Any] = super().lean_queryset(queryset)
        annotated: QuerySet[Any] = lean.annotate(
            has_pending=Case(
                When(pending_ask__isnull=False, then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            ),
            is_held=Case(
                When(held_condition(), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            ),
            thumbs_up=_has_feedback(Rating.UP),
            thumbs_down=_has_feedback(Rating.DOWN),
        )
        return annotated

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Conversation], search_term: str
    ) -> tuple[QuerySet[Conversation], bool]:
        """Exact id (any UUID spelling), else exact owner username or email, or title prefix.
        Never a leading-wildcard scan; never duplicates."""
        term = search_term.strip()
        if not term:
            return queryset, False
        pk = _search_uuid(term)
        if pk is not None:
            return queryset.filter(pk=pk), False
        owners = get_user_model()._default_manager.filter(_owner_lookup(term)).values("pk")
        found = Q(owner__in=owners) | Q(title__startswith=term)
        try:
            words = parse_query(term)
        except InvalidSearch:  # too long for a search: the exact lookups only
            return queryset.filter(found), False
        # The index the API searches (docs/search.md): titles and display rows.
        matching = matching_conversations(Conversation.objects.using(queryset.db).all(), words)
        return queryset.filter(found | Q(pk__in=matching.order_by().values("pk"))), False

    # ------------------------------------------------------------------ columns and fields

    @admin.display(description="title", ordering="title")
    def title_short(self, obj: Conversation) -> str:
        """The title, cut to 80 characters."""
        return Truncator(obj.title).chars(80)

    @admin.display(description="owner", ordering="owner")
    def owner_link(self, obj: Conversation) -> SafeString | str:
        """The owner, linked to the list of the owner's conversations."""
        if obj.owner_id is None:
            return "-"
        query = urlencode({"owner__id__exact": obj.owner_id})
        return format_html('<a href="?{}">{}</a>', query, str(obj.owner))

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Conversation) -> SafeString:
        """The status as a badge."""
        return badge(obj.status, obj.get_status_display())

    @admin.display(description="pending")
    def pending_badge(self, obj: Conversation) -> SafeString | str:
        """A badge when the conversation waits on a pending ask."""
        has_pending = getattr(obj, "has_pending", None)
        if has_pending is None:
            has_pending = obj.pending_ask is not None
        return badge("pending", "ask") if has_pending else ""

    @admin.display(description="hold")
    def held_badge(self, obj: Conversation) -> SafeString | str:
        """A badge when the conversation is under a legal hold."""
        return badge("held", "hold") if getattr(obj, "is_held", False) else ""

    @admin.display(description="legal hold")
    def hold_state(self, obj: Conversation) -> str:
        """The hold: its reason, who placed it and when; "-" when not held."""
        hold = Hold.objects.select_related("placed_by").filter(conversation_id=obj.pk).first()
        if hold is None:
            return "-"
        who = f" by {hold.placed_by}" if hold.placed_by is not None else ""
        return f"{hold.reason} (placed{who}, {hold.placed_at:%Y-%m-%d %H:%M} UTC)"

    @admin.display(description="secrets redacted")
    def redactions(self, obj: Conversation) -> str:
        """Secrets replaced at write time, per detector (docs/write-path.md "Redaction")."""
        counts = RedactionCount.objects.filter(conversation_id=obj.pk).order_by("detector")
        return ", ".join(f"{c.detector}: {c.count}" for c in counts) or "none"

    @admin.display(description="pinned")
    def pinned_text(self, obj: Conversation) -> str:
        """yes or no (as text: the page draws no image)."""
        return "yes" if obj.pinned else "no"

    @admin.display(description="archived")
    def archived_text(self, obj: Conversation) -> str:
        """yes or no (as text: the page draws no image)."""
        return "yes" if obj.archived else "no"

    @admin.display(description="organised")
    def organised(self, obj: Conversation) -> str:
        """Pinned, archived and the tags, in one short column."""
        marks = [*(["pinned"] if obj.pinned else []), *(["archived"] if obj.archived else [])]
        marks += [f"#{tag}" for tag in obj.tags or []]
        return Truncator(" ".join(marks)).chars(60)

    @admin.display(description="feedback")
    def feedback_marks(self, obj: Conversation) -> str:
        """ "+1" and/or "-1" when the conversation's rows have thumbs up and/or down (the counts
        are on its page)."""
        marks = [
            ("+1", getattr(obj, "thumbs_up", False)),
            ("-1", getattr(obj, "thumbs_down", False)),
        ]
        return " ".join(mark for mark, given in marks if given)

    @admin.display(description="feedback")
    def feedback_total(self, obj: Conversation) -> SafeString:
        """The counts, linked to the conversation's feedback list."""
        counts = feedback_counts(obj)
        query = urlencode({"conversation__id__exact": str(obj.pk)})
        return format_html(
            '<a href="{}?{}">+{} / -{}</a>',
            self.changelist_url("feedback"),
            query,
            counts["up"],
            counts["down"],
        )

    @admin.display(description="tags")
    def tag_links(self, obj: Conversation) -> SafeString | str:
        """Each tag, linked to the conversations with that tag."""
        if not obj.tags:
            return "-"
        url = self.changelist_url("conversation")
        return format_html_join(
            " ", '<a href="{}?{}">#{}</a>', ((url, urlencode({"tag": t}), t) for t in obj.tags)
        )

    @admin.display(description="pending ask")
    def pending_ask_pretty(self, obj: Conversation) -> SafeString | str:
        """The pending ask as indented JSON."""
        return "-" if obj.pending_ask is None else pre(obj.pending_ask)

    @admin.display(description="cost (USD)")
    def cost(self, obj: Conversation) -> str:
        """The cost of the conversation's priced tokens at the current prices (docs/usage.md);
        "-" when no counted token has a price."""
        value = conversation_usage(obj)["cost"]
        return "-" if value is None else f"${value}"

    @admin.display(description="tokens by model")
    def usage_by_model_pretty(self, obj: Conversation) -> SafeString:
        """The counters of each model, as indented JSON."""
        return pre(obj.usage_by_model)

    @admin.display(description="metadata")
    def metadata_pretty(self, obj: Conversation) -> SafeString:
        """The metadata as indented JSON."""
        return pre(obj.metadata)

    @admin.display(description="parent")
    def parent_link(self, obj: Conversation) -> SafeString | str:
        """The conversation that launched this one (a subagent's parent), linked; "-" for a
        top-level conversation (docs/admin.md "Subagents")."""
        if obj.parent_id is None:
            return "-"
        return format_html(
            '<a href="{}">{}</a>', self.url_for("conversation", obj.parent_id), obj.parent_id
        )

    @admin.display(description="children")
    def children_list(self, obj: Conversation) -> SafeString | str:
        """The first ``CHILDREN_SHOWN`` children, oldest first, each linked with the call that
        launched it, its status and steps; the rest through the conversation list (one query,
        none without children: ``child_count``)."""
        if obj.child_count == 0:
            return "-"
        children = list(
            Conversation.objects.filter(parent_id=obj.pk)
            .order_by("parent_created_event_seq", "pk")
            .only("pk", "title", "status", "parent_call_id", "tool_call_count")[:CHILDREN_SHOWN]
        )
        items = format_html_join(
            "",
            '<li><a href="{}">{}</a> · {} · {} step(s){}</li>',
            (
                (
                    self.url_for("conversation", child.pk),
                    Truncator(child.title or str(child.pk)).chars(80),
                    child.status,
                    child.tool_call_count,
                    format_html(" · call {}", child.parent_call_id) if child.parent_call_id else "",
                )
                for child in children
            ),
        )
        query = urlencode({"parent__id__exact": str(obj.pk)})
        every = format_html(
            '<a href="{}?{}">all {} in the conversation list</a>',
            self.changelist_url("conversation"),
            query,
            obj.child_count,
        )
        return format_html("<ul>{}</ul>{}", items, every)

    @admin.display(description="rows")
    def rows(self, obj: Conversation) -> SafeString:
        """Links to the conversation's record, display rows, tool calls and source records."""
        query = urlencode({"conversation__id__exact": str(obj.pk)})
        return format_html(
            '<a href="{}?{}">record</a> · <a href="{}?{}">display rows</a> · '
            '<a href="{}?{}">tool calls</a> · <a href="{}?{}">source records</a> · '
            '<a href="{}?{}">access log</a> · <a href="{}?{}">redaction counts</a> · '
            '<a href="{}?{}">share links</a> · <a href="{}?{}">feedback</a>',
            self.changelist_url("message"),
            query,
            self.changelist_url("displaymessage"),
            query,
            self.changelist_url("toolcall"),
            query,
            self.changelist_url("sourcerecord"),
            query,
            self.changelist_url("accesslogentry"),
            query,
            self.changelist_url("redactioncount"),
            query,
            self.changelist_url("share"),
            query,
            self.changelist_url("feedback"),
            query,
        )

    # ------------------------------------------------------------------ the transcript

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Conversation | None = None,
    ) -> HttpResponse:
        """The conversation's fields and one page of its transcript (``?page=N``), and the
        hold form for staff with ``manage_holds``. Each view by someone who does not own the
        conversation is written to the access log (``change_view``, docs/admin.md "The access
        log")."""
        if obj is not None:
            context["transcript"] = self._transcript(request, obj.pk, obj.last_seq)
            context["hold_form"] = {
                "allowed": self.can_manage_holds(request),
                "held": Hold.objects.filter(conversation_id=obj.pk).exists(),
                "url": reverse(
                    f"{self.admin_site.name}:murmur_conversations_conversation_hold",
                    args=[obj.pk],
                ),
            }
        return super().render_change_form(request, context, add, change, form_url, obj)

    # ------------------------------------------------------------------ legal holds

    def can_manage_holds(self, request: HttpRequest) -> bool:
        """Staff with ``murmur_conversations.manage_holds`` place and release holds."""
        return bool(request.user.has_perm("murmur_conversations.manage_holds"))

    def get_urls(self) -> list[URLPattern]:
        """Django's URLs plus ``<id>/hold/`` (POST: place or release a hold)."""
        hold = path(
            "<path:object_id>/hold/",
            self.admin_site.admin_view(self.hold_view),
            name="murmur_conversations_conversation_hold",
        )
        return [hold, *super().get_urls()]

    def hold_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST ``action=place`` with a ``reason``, or ``action=release``: the one write of
        this admin besides deleting, through ``services.place_hold`` / ``release_hold``."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.can_manage_holds(request):
            raise PermissionDenied
        pk = _search_uuid(object_id)
        if pk is None or not Conversation.objects.filter(pk=pk).exists():
            self.message_user(request, "No such conversation.", messages.WARNING)
            return HttpResponseRedirect(self.changelist_url("conversation"))
        action = request.POST.get("action")
        try:
            if action == "place":
                services.place_hold(
                    conversation=pk, reason=request.POST.get("reason", ""), placed_by=request.user
                )
                self.message_user(request, "The conversation is under a legal hold.")
            elif action == "release":
                if services.release_hold(conversation=pk):
                    self.message_user(request, "The legal hold was released.")
            else:
                self.message_user(request, "Unknown hold action.", messages.ERROR)
        except InvalidContent as error:
            self.message_user(request, str(error), messages.ERROR)
        except (ConversationNotFound, WriteConflict) as error:
            self.message_user(request, f"Nothing changed: {error}", messages.ERROR)
        return HttpResponseRedirect(self.url_for("conversation", pk))

    def _transcript(self, request: HttpRequest, pk: uuid.UUID, last_seq: int) -> dict[str, Any]:
        # seq is gapless from 1, so a page is a seq range: no COUNT and no OFFSET.
        pages = max(1, -(-last_seq // TRANSCRIPT_PAGE_SIZE))
        try:
            page = int(request.GET.get("page", "1"))
        except ValueError:
            page = 1
        page = min(max(page, 1), pages)
        first = (page - 1) * TRANSCRIPT_PAGE_SIZE
        rows = (
            DisplayMessage.objects.filter(
                conversation_id=pk, seq__gt=first, seq__lte=first + TRANSCRIPT_PAGE_SIZE
            )
            .select_related("tool_call")
            .order_by("seq")
        )
        return {
            "cards": cards_for(rows, self.url_for),
            "page": page,
            "pages": pages,
            "rows": last_seq,
            "previous": page - 1 if page > 1 else None,
            "next": page + 1 if page < pages else None,
        }

    # ------------------------------------------------------------------ exporting

    @admin.action(description="Export selected conversations as murmur JSONL", permissions=["view"])
    def export_murmur_jsonl(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> HttpResponseBase:
        """One ``<id>.jsonl`` file (``exporters.export_murmur``) for one conversation, a zip of
        them for several; written to a spooled temporary file, so memory stays bounded."""
        conversations = list(queryset.order_by("-saved_at", "-id"))
        refused = log_views(request, [c.pk for c in conversations], AccessSurface.ADMIN_EXPORT)
        if refused is not None:
            return refused
        if len(conversations) == 1:
            conversation = conversations[0]
            return StreamingHttpResponse(
                (line.encode() for line in export_murmur(conversation)),
                content_type="application/jsonl; charset=utf-8",
                headers={"Content-Disposition": f'attachment; filename="{conversation.pk}.jsonl"'},
            )
        spool = tempfile.SpooledTemporaryFile(max_size=EXPORT_SPOOL_BYTES)  # noqa: SIM115
        with zipfile.ZipFile(spool, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for conversation in conversations:
                with archive.open(f"{conversation.pk}.jsonl", "w", force_zip64=True) as member:
                    for line in export_murmur(conversation):
                        member.write(line.encode())
        spool.seek(0)
        return FileResponse(
            spool,
            as_attachment=True,
            filename="conversations-murmur.zip",
            content_type="application/zip",
        )

    # ------------------------------------------------------------------ deleting

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Staff with the conversation delete permission (Django's rule)."""
        return admin.ModelAdmin.has_delete_permission(self, request, obj)

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        """A summary from the counters instead of Django's collector, which would load every
        child row: each conversation with its record and display row counts. Held
        conversations are "protected": Django's confirmation page then refuses the delete."""
        conversations = list(objs)
        held = set(
            Conversation.objects.filter(pk__in=[c.pk for c in conversations])
            .filter(held_condition())
            .values_list("pk", flat=True)
        )
        protected = [f"{c} (under a legal hold)" for c in conversations if c.pk in held]
        summary: list[Any] = []
        for conversation in conversations:
            url = reverse(
                f"{self.admin_site.name}:murmur_conversations_conversation_change",
                args=[conversation.pk],
            )
            summary.append(format_html('Conversation: <a href="{}">{}</a>', url, conversation))
            summary.append(
                [
                    f"{conversation.record_length} record messages",
                    f"{conversation.last_seq} display messages",
                    "all its tool calls and source records",
                ]
            )
        counts = {
            "conversations": len(conversations),
            "record messages": sum(c.record_length for c in conversations),
            "display messages": sum(c.last_seq for c in conversations),
        }
        return summary, counts, set(), protected

    def log_deletions(self, request: HttpRequest, queryset: Any) -> list[LogEntry]:
        """Django's admin log entries of the deletion, named by each conversation's id, never
        by its title: nothing of a deleted conversation's content stays behind (docs/security.md
        "What deletion removes")."""
        content_type = get_content_type_for_model(self.model)
        staff: Any = request.user.pk  # signed in: the admin lets nobody else delete
        return LogEntry.objects.bulk_create(
            [
                LogEntry(
                    user_id=staff,
                    content_type_id=content_type.pk,
                    object_id=str(obj.pk),
                    object_repr=str(obj.pk),
                    action_flag=DELETION,
                    change_message="",
                )
                for obj in queryset
            ]
        )

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> HttpResponse:
        """The base answer, its message naming the conversation by id (the title went with
        it)."""
        return super().response_delete(request, str(obj_id), obj_id)

    def delete_model(self, request: HttpRequest, obj: Conversation) -> None:
        """Delete through ``services.delete_conversation`` (batches, then the signal)."""
        try:
            services.delete_conversation(conversation=obj.pk)
        except ConversationNotFound:
            pass  # deleted meanwhile
        except ConversationHeld:  # held since the confirmation page
            self.message_user(request, f"{obj} is under a legal hold: not deleted.", messages.ERROR)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        """Delete each selected conversation through ``services.delete_conversation``."""
        for pk in list(queryset.order_by().values_list("pk", flat=True)):
            try:
                services.delete_conversation(conversation=pk)
            except ConversationNotFound:
                continue  # deleted meanwhile
            except ConversationHeld:
                self.message_user(
                    request, f"{pk} is under a legal hold: not deleted.", messages.ERROR
                )
