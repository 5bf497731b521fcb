"""The admin of share links, feedback and tags (docs/admin.md): lists that never show a token, the
revoke action and its permission, feedback filtered by rating, conversations filtered by feedback,
pin, archive and tag, and lists whose queries do not grow with their rows."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from murmur_conversations import services
from murmur_conversations.models import Conversation, DisplayMessage, Share
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db


def changelist(model: str) -> str:
    return reverse(f"admin:murmur_conversations_{model}_changelist")


def rated(
    conversation: Conversation,
    user: User,
    rating: int,
    text: str = "answer",
    tags: tuple[str, ...] = (),
) -> DisplayMessage:
    services.save_message(conversation=conversation, message={"role": "assistant", "content": text})
    row = DisplayMessage.objects.filter(conversation=conversation).order_by("-seq").first()
    assert row is not None
    services.set_feedback(
        conversation=conversation, display_message=row, user=user, rating=rating, comment=text
    )
    if tags:
        services.update_conversation(conversation=conversation, tags=list(tags))
    return row


@pytest.fixture
def staff(client: Client, make_user: MakeUser) -> Callable[..., Client]:
    def make(*codenames: str) -> Client:
        member = make_user(is_staff=True)
        member.user_permissions.set(
            Permission.objects.filter(
                content_type__app_label="murmur_conversations", codename__in=codenames
            )
        )
        client.force_login(member)
        return client

    return make


def test_share_list_shows_state_and_never_a_token(
    admin_client: Client, conversation: Conversation, user: User
) -> None:
    share, token = services.create_share(conversation=conversation, created_by=user)
    services.create_share(conversation=conversation, created_by=user, mode="live")
    response = admin_client.get(changelist("share"))
    assert response.status_code == 200
    assert token not in response.text and share.token_hash not in response.text
    assert response.text.count('murmur-status-completed">active<') == 2
    page = admin_client.get(reverse("admin:murmur_conversations_share_change", args=[share.pk]))
    assert page.status_code == 200
    assert token not in page.text and share.token_hash not in page.text


def test_revoke_action_needs_its_permission(
    staff: Callable[..., Client], conversation: Conversation, user: User
) -> None:
    share, _ = services.create_share(conversation=conversation, created_by=user)
    viewer = staff("view_share")
    assert "revoke_selected" not in viewer.get(changelist("share")).text
    viewer.post(changelist("share"), {"action": "revoke_selected", "_selected_action": [share.pk]})
    share.refresh_from_db()
    assert share.revoked_at is None
    revoker = staff("view_share", "revoke_share")
    assert "revoke_selected" in revoker.get(changelist("share")).text
    response = revoker.post(
        changelist("share"), {"action": "revoke_selected", "_selected_action": [share.pk, "nope"]}
    )
    assert response.status_code == 302
    assert Share.objects.get(pk=share.pk).revoked_at is not None
    listed = revoker.get(changelist("share") + "?state=revoked").context["cl"].result_list
    assert [s.pk for s in listed] == [share.pk]


def test_feedback_is_listed_and_filtered_by_rating(
    admin_client: Client, make_conversation: MakeConversation, user: User
) -> None:
    good, bad = make_conversation(title="good"), make_conversation(title="bad")
    rated(good, user, 1, "fine")
    rated(bad, user, -1, "wrong answer", tags=("eval",))
    response = admin_client.get(changelist("feedback") + "?rating=-1")
    assert [f.comment for f in response.context["cl"].result_list] == ["wrong answer"]
    conversations = admin_client.get(changelist("conversation") + "?feedback=down")
    assert [c.title for c in conversations.context["cl"].result_list] == ["bad"]
    assert [c.thumbs_down for c in conversations.context["cl"].result_list] == [True]
    tagged = admin_client.get(changelist("conversation") + "?tag=EVAL")
    assert [c.title for c in tagged.context["cl"].result_list] == ["bad"]
    tags = admin_client.get(changelist("conversationtag") + "?q=Eval")
    assert [t.name for t in tags.context["cl"].result_list] == ["eval"]
    page = admin_client.get(
        reverse("admin:murmur_conversations_conversation_change", args=[bad.pk])
    )
    assert "#eval" in page.text and "+0 / -1" in page.text


@pytest.mark.parametrize("model", ["share", "feedback", "conversationtag"])
def test_lists_cost_the_same_queries_whatever_their_rows(
    admin_client: Client, make_conversation: MakeConversation, user: User, model: str
) -> None:
    def grow(n: int) -> None:
        for i in range(n):
            conversation = make_conversation(title=f"c{i}")
            rated(conversation, user, 1 if i % 2 else -1, tags=(f"t{i}",))
            services.create_share(conversation=conversation, created_by=user)

    def count() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(changelist(model)).status_code == 200
        return len(captured)

    grow(2)
    admin_client.get(changelist(model))
    few = count()
    grow(20)
    assert count() == few
    assert Share.objects.count() == 22
