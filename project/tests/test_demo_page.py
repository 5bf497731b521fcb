"""The demo page's views (docs/demo.md): login required, the page shell, the login page, the
"Run demo agent" button that plays the scripted run in a background thread of the server, and the
Content-Security-Policy of the demo's pages and the admin (with no inline code for it to block)."""

from __future__ import annotations

import re
import threading
from html.parser import HTMLParser
from pathlib import Path
from typing import NoReturn

import pytest
from django.contrib.auth.models import User
from django.test import Client

from murmur_conversations import services
from murmur_conversations.models import Conversation, ToolCall
from project.demo import views
from project.settings import CSP_DIRECTIVES
from tests.helpers import MakeConversation, MakeUser, Response, assert_counters_match_rows

# The runs play in a thread of their own, on its own connection: those tests commit for real.
pytestmark = pytest.mark.django_db

TIMEOUT = 30  # seconds a demo run may take with no delay


def join_demo_runs() -> None:
    """Wait for the demo agent threads this test started (bounded), and check they ended."""
    for thread in threading.enumerate():
        if thread.name.startswith("demo-agent-"):
            thread.join(TIMEOUT)
            assert not thread.is_alive()


@pytest.fixture
def no_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MURMUR_DEMO_AGENT_DELAY", "0")


def test_page_needs_login(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_login_page_and_sign_in(client: Client, user: User) -> None:
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert b'name="username"' in page.content
    assert b"demo</strong> / <strong>demo" in page.content
    bad = client.post("/accounts/login/", {"username": user.username, "password": "nope"})
    assert bad.status_code == 200
    assert b"do not match" in bad.content
    good = client.post("/accounts/login/", {"username": user.username, "password": "pw"})
    assert good.status_code == 302
    assert good["Location"] == "/"


def test_page_shell_loads_the_script_and_no_data(
    client: Client, user: User, make_conversation: MakeConversation
) -> None:
    make_conversation(title="<b>not rendered by the server</b>")
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "/static/demo/demo.js" in html
    assert "/static/demo/demo.css" in html
    assert 'aria-live="polite"' in html
    assert "Run demo agent" in html
    assert "not rendered by the server" not in html  # the script reads the API
    assert client.post("/").status_code == 405


def test_static_files_are_found(client: Client, user: User) -> None:
    from django.contrib.staticfiles import finders

    script_path, style_path = finders.find("demo/demo.js"), finders.find("demo/demo.css")
    assert script_path
    assert style_path
    script = Path(script_path).read_text(encoding="utf-8")
    assert "innerHTML" not in script  # model text goes in through textContent only


def test_run_agent_needs_login_and_post(client: Client, user: User) -> None:
    assert client.post("/demo/run-agent/")["Location"].startswith("/accounts/login/")
    client.force_login(user)
    assert client.get("/demo/run-agent/").status_code == 405
    assert Conversation.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_run_agent_plays_into_a_new_conversation(
    client: Client, user: User, make_user: MakeUser, no_delay: None
) -> None:
    client.force_login(user)
    response = client.post("/demo/run-agent/", HTTP_ACCEPT="application/json")
    assert response.status_code == 202
    join_demo_runs()
    conversation = Conversation.objects.get(pk=response.json()["conversation_id"])
    assert conversation.owner == user
    assert conversation.title.startswith("Demo agent run at ")
    assert conversation.status == "paused"
    statuses = sorted(
        ToolCall.objects.filter(conversation=conversation).values_list("status", flat=True)
    )
    assert statuses == ["completed", "completed", "completed", "failed"]
    assert_counters_match_rows(conversation)
    [child] = conversation.children.all()  # the Task call's subagent, the same owner's
    assert (child.owner, child.status) == (user, "idle")
    assert not Conversation.objects.filter(owner=make_user()).exists()


@pytest.mark.django_db(transaction=True)
def test_run_agent_without_script_redirects_to_the_page(
    client: Client, user: User, no_delay: None
) -> None:
    client.force_login(user)
    response = client.post("/demo/run-agent/")
    join_demo_runs()
    conversation = Conversation.objects.get(owner=user, parent__isnull=True)
    assert response.status_code == 302
    assert response["Location"] == f"/#{conversation.pk}"


def test_run_agent_refuses_when_busy(
    client: Client, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "run_slots", threading.BoundedSemaphore(1))
    assert views.run_slots.acquire(blocking=False)
    client.force_login(user)
    response = client.post("/demo/run-agent/", HTTP_ACCEPT="application/json")
    assert response.status_code == 429
    assert "already playing" in response.json()["detail"]
    assert client.post("/demo/run-agent/").status_code == 429
    assert Conversation.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_run_agent_failure_is_logged_and_releases_the_slot(
    client: Client, user: User, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(**kwargs: object) -> NoReturn:
        raise RuntimeError("agent exploded")

    monkeypatch.setattr(views, "run_demo_agent", boom)
    monkeypatch.setattr(views, "run_slots", threading.BoundedSemaphore(1))
    client.force_login(user)
    assert client.post("/demo/run-agent/", HTTP_ACCEPT="application/json").status_code == 202
    join_demo_runs()
    assert "agent exploded" in caplog.text
    assert views.run_slots.acquire(blocking=False)  # the slot came back


@pytest.mark.parametrize(("raw", "expected"), [("0.5", 0.5), ("-1", 0.0), ("soon", 0.15)])
def test_agent_delay_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: float
) -> None:
    monkeypatch.setenv("MURMUR_DEMO_AGENT_DELAY", raw)
    assert views.agent_delay() == expected


class InlineCode(HTMLParser):
    """What a page carries that ``script-src 'self'`` / ``style-src 'self'`` would block: inline
    scripts, <style> elements, style attributes, event-handler attributes, javascript: URLs."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._script_without_src = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        self._script_without_src = tag == "script" and not names.get("src")
        if tag == "style":
            self.found.append("<style>")
        for name, value in attrs:
            if name == "style" or name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")
            if name in ("href", "src", "action") and (value or "").strip().lower().startswith(
                "javascript:"
            ):
                self.found.append(f"<{tag} {name}=javascript:...>")

    def handle_data(self, data: str) -> None:
        if self._script_without_src and data.strip():
            self.found.append(f"inline script {data.strip()[:40]!r}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script_without_src = False


def inline_code(html: str) -> list[str]:
    parser = InlineCode()
    parser.feed(html)
    return parser.found


@pytest.mark.parametrize(
    ("html", "found"),
    [
        ('<script src="/s.js"></script><p class="x">ok</p>', []),
        ("<script>alert(1)</script>", ["inline script 'alert(1)'"]),
        ("<style>p{}</style>", ["<style>"]),
        ('<p style="color:red">', ["<p style=...>"]),
        ('<button onclick="go()">', ["<button onclick=...>"]),
        ('<a href=" JavaScript:go()">', ["<a href=javascript:...>"]),
    ],
)
def test_the_inline_code_finder(html: str, found: list[str]) -> None:
    assert inline_code(html) == found


def policy(response: Response) -> dict[str, list[str]]:
    header = response.headers["Content-Security-Policy"]
    return {
        directive.split()[0]: directive.split()[1:]
        for directive in (part.strip() for part in header.split(";"))
        if directive
    }


def test_pages_send_the_policy_and_carry_no_inline_code(
    client: Client, user: User, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation(title="Policy check")
    services.save_message(conversation=conversation, message={"role": "user", "content": "hi"})
    user.is_staff = user.is_superuser = True
    user.save()
    pages = ["/accounts/login/", "/admin/login/"]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200
        assert inline_code(response.content.decode()) == [], url
    client.force_login(user)
    admin_pages = [
        "/",
        "/admin/",
        "/admin/murmur_conversations/conversation/",
        f"/admin/murmur_conversations/conversation/{conversation.pk}/change/",
        f"/admin/murmur_conversations/conversation/{conversation.pk}/delete/",
        "/admin/murmur_conversations/displaymessage/",
        "/admin/auth/user/",
        f"/admin/auth/user/{user.pk}/change/",
        "/admin/auth/group/add/",
    ]
    for url in [*pages, *admin_pages]:
        response = client.get(url, follow=True)
        assert response.status_code == 200, url
        assert policy(response) == CSP_DIRECTIVES, url
        assert inline_code(response.content.decode()) == [], url
    for sources in CSP_DIRECTIVES.values():
        assert not {"'unsafe-inline'", "'unsafe-eval'", "*"} & set(sources)


def test_the_api_answers_with_the_policy_too(
    client: Client, user: User, conversation: Conversation
) -> None:
    client.force_login(user)
    response = client.get(f"/api/conversations/{conversation.pk}/")
    assert response.status_code == 200
    assert policy(response)["default-src"] == ["'self'"]


def test_the_script_builds_no_code_or_styles_from_strings() -> None:
    from django.contrib.staticfiles import finders

    found = finders.find("demo/demo.js")
    assert found
    script = Path(found).read_text(encoding="utf-8")
    for forbidden in ("innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function"):
        assert forbidden not in script
    # Styles come from demo.css through class names; a style attribute would meet style-src.
    assert not re.search(r"\.style\b|setAttribute\(\s*[\"']style", script)


def test_favicon_redirects_to_the_demo_icon(client: Client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == "/static/demo/favicon.svg"
    from django.contrib.staticfiles import finders

    assert finders.find("demo/favicon.svg")
