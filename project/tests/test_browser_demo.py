"""The demo page in a real browser (docs/demo.md): Playwright drives Debian's Chromium against a real
uvicorn server on loopback that serves the test database. Log in, open a conversation, see the
cards; run the demo agent and watch text stream in and tool badges change; drop and restore the
connection and find nothing lost, also across a resync and a switch of conversations; page older
rows on scroll; search and jump to a hit, tokens and cost; answer the pending ask; rename and
delete from the sidebar with a second tab kept right; a 390 px phone that never scrolls sideways; remote images only on request; times in the
viewer's locale; the admin under the Content-Security-Policy. Every test also asserts that no page
logged an error or met a CSP violation.

Skipped unless ``CHROMIUM_PATH`` is set (``.ci/run`` sets it). Browsers are never downloaded.
Screenshots are kept under ``test-artifacts/``.
"""

from __future__ import annotations

import base64
import io
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connections
from playwright.sync_api import Browser, BrowserContext, Page, Route
from pytest_django import Settings

from murmur_conversations import services
from murmur_conversations.models import Conversation, DisplayMessage
from murmur_conversations.realtime import broadcast
from tests.servers import child_environment, uvicorn_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
TIMEOUT = 20  # seconds: the bound of every wait (server start, frames, page changes)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def server_env(settings: Settings) -> Iterator[dict[str, str]]:
    """Environment of the server process: the test database, and on Redis a private prefix that
    this process's channel layer shares, so writes made here reach the server's sockets live."""
    yield child_environment(
        settings,
        prefix="murmur-browser",
        drop=("DJANGO_ALLOW_ASYNC_UNSAFE",),
        MURMUR_DEMO_AGENT_DELAY="0.5",
    )
    assert broadcast.get_broadcaster().flush(TIMEOUT)


@pytest.fixture
def server(server_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of a uvicorn process serving the demo (see ``tests.servers``)."""
    with uvicorn_server(
        server_env, tmp_path / "server.log", scheme="http", timeout=TIMEOUT
    ) as base:
        yield base


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    """Debian's Chromium through Playwright (never a downloaded browser). Playwright's sync API
    keeps an event loop in this thread, so Django is told that its ORM calls here are safe."""
    from playwright.sync_api import expect, sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    expect.set_options(timeout=TIMEOUT * 1000)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=os.environ["CHROMIUM_PATH"], args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()
            close_connections()


def close_connections() -> None:
    """Close the database connections (and PostgreSQL pools) opened while Playwright ran: its
    event loop gives the ORM a context of its own, which Django's teardown does not reach."""
    for conn in connections.all(initialized_only=True):
        conn.close()
        close_pool = getattr(conn, "close_pool", None)
        if close_pool is not None:
            close_pool()


@pytest.fixture
def demo_user(django_user_model: type[User]) -> User:
    """The demo login and conversations of ``demo_setup``; the password hashed with a hasher the
    server's settings know (the test settings use a fast one the server does not)."""
    call_command("demo_setup", stdout=io.StringIO())
    user = django_user_model.objects.get(username="demo")
    hasher = PBKDF2PasswordHasher()
    user.password = hasher.encode("demo", hasher.salt())
    user.save(update_fields=["password"])
    return user


#: Runs in every document before its own scripts (Playwright's init scripts are not subject to
#: the page's CSP): it records the policy's violations, which the page cannot hide.
CSP_PROBE = """
window.__murmurViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__murmurViolations.push(
    `CSP ${event.effectiveDirective} blocked ${event.blockedURI || "inline code"} in ${event.documentURI}`);
});
"""


class Problems:
    """What went wrong in the pages of one browser context: console errors (Chromium also logs
    every CSP violation there), uncaught exceptions and the CSP violations the probe saw."""

    def __init__(self, context: BrowserContext) -> None:
        context.set_default_timeout(TIMEOUT * 1000)
        self.seen: list[str] = []
        self.pages: list[Page] = []
        context.add_init_script(CSP_PROBE)
        context.on("page", self.watch)

    def watch(self, page: Page) -> None:
        self.pages.append(page)
        page.on(
            "console",
            lambda message: (
                self.seen.append(f"console.error: {message.text} ({message.location['url']})")
                if message.type == "error"
                else None
            ),
        )
        page.on("pageerror", lambda error: self.seen.append(f"uncaught: {error}"))
        page.on(
            "response",
            lambda response: (
                self.seen.append(f"HTTP {response.status} {response.url}")
                if response.status >= 400
                else None
            ),
        )

    def assert_none(self, *expected: str) -> None:
        """No problem but those containing one of ``expected`` (e.g. the console line Chromium
        logs for an HTTP status the test provoked)."""
        for page in self.pages:
            if not page.is_closed():
                self.seen += page.evaluate("window.__murmurViolations || []")
        assert [p for p in self.seen if not any(e in p for e in expected)] == []


class WatchedContext:
    """A browser context and the problems of its pages (``problems``)."""

    def __init__(self, context: BrowserContext) -> None:
        self.context = context
        self.problems = Problems(context)

    def new_page(self) -> Page:
        return self.context.new_page()


@pytest.fixture
def context(browser: Browser) -> Iterator[WatchedContext]:
    """A desktop browser context whose problems the test asserts away at its end."""
    watched = WatchedContext(browser.new_context(viewport={"width": 1280, "height": 860}))
    yield watched
    watched.context.close()


def log_in(page: Page, base: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("demo")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#conversations button.conversation").first).to_be_visible()


def open_conversation(page: Page, title: str) -> None:
    from playwright.sync_api import expect

    page.locator("#conversations button.conversation", has_text=title).first.click()
    expect(page.locator("#conversation-title")).to_have_text(title)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")


def shown_ids(page: Page) -> list[str]:
    ids: list[str] = page.locator("#cards li.card").evaluate_all(
        "(cards) => cards.map((c) => c.dataset.id)"
    )
    return ids


def stored_ids(conversation: Conversation) -> list[str]:
    rows = DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
    return [str(pk) for pk in rows.values_list("pk", flat=True)]


def sidebar_titles(page: Page) -> list[str]:
    return page.locator("#conversations .conversation .title").all_inner_texts()


def test_live_page_streams_badges_and_catches_up(
    server: str, context: WatchedContext, demo_user: User
) -> None:
    from playwright.sync_api import expect

    page = context.new_page()
    log_in(page, server)

    # Open a conversation: its cards, in seq order, exactly the stored rows.
    nightly = Conversation.objects.get(owner=demo_user, external_id="demo-nightly")
    open_conversation(page, "Why is the nightly slow?")
    expect(page.locator("#cards li.card")).to_have_count(len(stored_ids(nightly)))
    assert shown_ids(page) == stored_ids(nightly)
    expect(page.locator("#cards li.thinking details")).to_have_count(1)
    expect(page.locator("#cards li.thinking details")).not_to_have_attribute("open", "")
    expect(page.locator("#pending .question")).to_contain_text("Pin image-tools<3")
    expect(page.locator("#pending .options button")).to_have_text(["pin", "cache"])
    # Each card carries its row's own time.
    stamps = page.locator("#cards li.card time.when").evaluate_all(
        "(times) => times.map((t) => t.dateTime)"
    )
    rows = DisplayMessage.objects.filter(conversation=nightly).order_by("seq")
    assert stamps == [row.created_at.isoformat().replace("+00:00", "Z") for row in rows]

    # A second tab: its sidebar learns about the run and the rename without reloading.
    other = context.new_page()
    other.goto(f"{server}/")
    expect(other.locator("#conversations button.conversation")).to_have_count(2)

    # Run the demo agent: a new conversation opens, text streams in, badges move on.
    page.get_by_role("button", name="Run demo agent").click()
    expect(page.locator("#conversation-title")).to_have_text(re.compile("^Demo agent run at"))
    expect(page.locator("#streams li.streaming p.text")).to_contain_text("nightly build went")
    run_id = page.evaluate("window.location.hash.slice(1)")
    run = Conversation.objects.get(pk=run_id)
    expect(page.locator("#pending .question")).to_contain_text("Pin image-tools<3")
    expect(page.locator("#streams li")).to_have_count(0)  # the saved text replaced the stream
    badges = page.locator("#cards > li.tool-call > .card-head [data-role=tool-status]")
    expect(badges).to_have_text(["completed", "completed", "failed", "completed"])
    # the Task call's subagent ran and finished, live in its card
    task = page.locator("#cards > li.tool-call", has_text="Tool call · Task")
    expect(task.locator("[data-role=subagent-status]")).to_have_text("idle")
    expect(task.locator("[data-role=subagent-steps]")).to_have_text("2 steps")
    histories = page.locator("#cards > li.tool-call").evaluate_all(
        "(cards) => cards.map((c) => c.dataset.history.split(' '))"
    )
    assert any(len(history) >= 2 for history in histories), histories
    assert shown_ids(page) == stored_ids(run)
    expect(other.locator("#conversations button.conversation")).to_have_count(3)
    expect(other.locator("#conversations button.conversation").first).to_contain_text(
        "Demo agent run at"
    )

    # A rename made elsewhere reaches both sidebars and the open transcript's title.
    services.update_conversation(conversation=run, title="Renamed while watching")
    expect(page.locator("#conversation-title")).to_have_text("Renamed while watching")
    expect(other.locator("#conversations button.conversation").first).to_contain_text(
        "Renamed while watching"
    )

    # A tool call written here moves its badge live.
    services.save_message(
        conversation=run,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "live-1", "name": "pin", "input": {}}],
        },
    )
    live_badge = page.locator('#cards li[data-call-id="live-1"] [data-role=tool-status]')
    expect(live_badge).to_have_text("pending")
    services.update_tool_status(
        conversation=run, status="executing", tool_info={"call_id": "live-1"}
    )
    expect(live_badge).to_have_text("executing")

    # Drop the connection, write while it is down, restore it: everything arrives, once.
    page.evaluate("window.murmurDemo.dropConnection(true)")
    expect(page.locator("#connection")).to_have_attribute("data-state", "offline")
    services.save_message(
        conversation=run,
        message={"role": "assistant", "content": "Written while you were away."},
    )
    services.update_tool_status(
        conversation=run,
        status="completed",
        tool_info={"call_id": "live-1", "result": "pinned"},
    )
    services.set_status(conversation=run, status="idle")
    page.evaluate("window.murmurDemo.restoreConnection()")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(live_badge).to_have_text("completed")
    expect(page.locator("#cards li.card").last).to_contain_text("Written while you were away.")
    expect(page.locator("#conversation-status")).to_have_text("idle")
    expect(page.locator("#pending")).to_be_hidden()
    assert shown_ids(page) == stored_ids(run)

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "demo-page.png"), animations="disabled")
    context.problems.assert_none()


def test_a_task_card_opens_its_subagents_transcript_nested(
    server: str, context: WatchedContext, demo_user: User
) -> None:
    """docs/demo.md "Subagents": the Task card follows its child's status and steps live and
    opens the child's transcript nested in place; the sidebar lists top-level conversations."""
    from playwright.sync_api import expect

    parent = services.start_conversation(owner=demo_user, title="Survey the garden")
    services.save_message(
        conversation=parent,
        message={
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll send a subagent to count the beds."},
                {
                    "type": "tool_call",
                    "id": "toolu_survey",
                    "name": "Task",
                    "input": {"description": "Count the beds", "prompt": "Count the beds"},
                },
            ],
        },
    )
    child = services.start_conversation(
        owner=demo_user, parent=parent, parent_call_id="toolu_survey", title="Count the beds"
    )
    services.set_status(conversation=child, status="running")
    services.save_message(conversation=child, message={"role": "user", "content": "Count the beds"})
    page = context.new_page()
    log_in(page, server)
    open_conversation(page, "Survey the garden")
    expect(
        page.locator("#conversations button.conversation", has_text="Count the beds")
    ).to_have_count(0)
    task = page.locator('#cards > li[data-call-id="toolu_survey"]')
    status = task.locator("[data-role=subagent-status]")
    steps = task.locator("[data-role=subagent-steps]")
    expect(status).to_have_text("running")
    expect(steps).to_have_text("0 steps")
    # live: each step of the child, then its end, reach the parent's card
    services.save_message(
        conversation=child,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c1", "name": "count_beds", "input": {}}],
        },
    )
    expect(steps).to_have_text("1 step")
    services.save_message(
        conversation=child, message={"role": "tool", "tool_call_id": "c1", "content": "7 beds"}
    )
    services.save_message(conversation=child, message={"role": "assistant", "content": "Seven."})
    services.set_status(conversation=child, status="idle")
    expect(status).to_have_text("idle")
    # open the child's transcript in place: its rows, in order, inside the Task card
    task.get_by_role("button", name="Open subagent").click()
    nested = task.locator("ol.nested > li.card")
    expect(nested).to_have_count(len(stored_ids(child)))
    assert nested.evaluate_all("(cards) => cards.map((c) => c.dataset.id)") == stored_ids(child)
    expect(nested.last).to_contain_text("Seven.")
    expect(task.get_by_role("button", name="Hide subagent")).to_have_attribute(
        "aria-expanded", "true"
    )
    # the Task call finishing re-renders its card, the nested transcript stays open
    services.save_message(
        conversation=parent,
        message={"role": "tool", "tool_call_id": "toolu_survey", "content": "Seven."},
    )
    expect(task.locator(":scope > .card-head [data-role=tool-status]")).to_have_text("completed")
    expect(nested).to_have_count(len(stored_ids(child)))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "demo-subagent.png"), animations="disabled")
    task.get_by_role("button", name="Hide subagent").click()
    expect(nested).to_have_count(0)
    context.problems.assert_none()


def test_older_pages_load_on_scroll(server: str, browser: Browser, demo_user: User) -> None:
    from playwright.sync_api import expect

    long = services.start_conversation(owner=demo_user, title="A long conversation")
    services.save_messages(
        conversation=long,
        messages=[
            {"role": "user" if n % 2 else "assistant", "content": f"message number {n}"}
            for n in range(1, 131)
        ],
    )
    context = browser.new_context(viewport={"width": 1000, "height": 700})
    problems = Problems(context)
    page = context.new_page()
    log_in(page, server)
    page.locator("#conversations button.conversation", has_text="A long conversation").click()
    cards = page.locator("#cards li.card")
    expect(cards).to_have_count(50)
    expect(cards.last).to_have_text(re.compile("message number 130$"))
    for expected in (100, 130):
        page.locator("#transcript").evaluate("(box) => { box.scrollTop = 0; }")
        expect(cards).to_have_count(expected)
    expect(cards.first).to_have_text(re.compile("message number 1$"))
    assert shown_ids(page) == stored_ids(long)
    problems.assert_none()
    context.close()


def test_search_jumps_to_the_hit_and_shows_tokens_and_cost(
    server: str, browser: Browser, demo_user: User
) -> None:
    from playwright.sync_api import expect

    long = services.start_conversation(owner=demo_user, title="A long search")
    services.save_messages(
        conversation=long,
        messages=[
            {
                "role": "user" if n % 2 else "assistant",
                "content": "the marmalade jar is empty" if n == 3 else f"message number {n}",
            }
            for n in range(1, 131)
        ],
    )
    target = DisplayMessage.objects.get(
        conversation=long, content__text="the marmalade jar is empty"
    )
    context = browser.new_context(viewport={"width": 1000, "height": 700})
    problems = Problems(context)
    page = context.new_page()
    log_in(page, server)
    # Tokens and cost of the demo conversations (their messages carry usage).
    bisect = page.locator("#conversations .conversation-item", has_text="git bisect run")
    expect(bisect.locator(".usage")).to_have_text(re.compile(r"^79 tokens · <\$0\.01$"))
    open_conversation(page, "git bisect run")
    expect(page.locator("#conversation-usage")).to_have_text(re.compile("79 tokens"))
    assert "gpt-4o-mini" in (page.locator("#conversation-usage").get_attribute("title") or "")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "demo-usage.png"), animations="disabled")

    page.locator("#search-text").fill("marmalades -toast")
    page.locator("#search-text").press("Enter")
    hit = page.locator("#hits li")
    expect(hit).to_have_count(1)
    expect(hit.locator("mark")).to_have_text("marmalade")
    expect(hit.locator(".title")).to_have_text("A long search")
    expect(page.locator("#conversations")).to_be_hidden()  # results replace the list
    hit.locator("button").click()
    expect(page.locator("#conversation-title")).to_have_text("A long search")
    card = page.locator(f'#cards li.card[data-seq="{target.seq}"]')
    expect(card).to_be_in_viewport()  # two older pages were loaded to reach it
    expect(card).to_have_class(re.compile(r"\bhit\b"))
    page.screenshot(path=str(ARTIFACTS / "demo-search.png"), animations="disabled")
    page.locator("#search-text").press("Escape")
    expect(page.locator("#conversations")).to_be_visible()
    page.locator("#search-text").fill("nothingmatchesthis")
    page.locator("#search-text").press("Enter")
    expect(page.locator("#search-status")).to_have_text("Nothing found.")
    problems.assert_none()
    context.close()


def test_answer_the_pending_ask(server: str, context: WatchedContext, demo_user: User) -> None:
    from playwright.sync_api import expect

    nightly = Conversation.objects.get(owner=demo_user, external_id="demo-nightly")
    page = context.new_page()
    log_in(page, server)
    open_conversation(page, "Why is the nightly slow?")
    other = context.new_page()  # a second tab watching the same conversation
    other.goto(f"{server}/#{nightly.pk}")
    expect(other.locator("#pending .question")).to_contain_text("Pin image-tools<3")

    # An offered answer, one click: the saved user message shows, the ask goes, in both tabs.
    page.locator("#pending .options").get_by_role("button", name="cache").click()
    for tab in (page, other):
        expect(tab.locator("#cards li.card.user").last).to_have_text(re.compile("cache$"))
        expect(tab.locator("#pending")).to_be_hidden()
        expect(tab.locator("#conversation-status")).to_have_text("idle")
    nightly.refresh_from_db()
    assert (nightly.status, nightly.pending_ask) == ("idle", None)
    assert shown_ids(page) == stored_ids(nightly)

    # A free-text answer to a new question without offered answers.
    services.set_status(
        conversation=nightly, status="paused", pending_ask={"question": "When do we ship?"}
    )
    expect(page.locator("#pending .question")).to_have_text("When do we ship?")
    expect(page.locator("#pending .options button")).to_have_count(0)
    page.get_by_label("Your answer", exact=True).fill("Friday, after the\nnightly is green")
    page.get_by_role("button", name="Send answer").click()
    expect(page.locator("#cards li.card.user").last).to_contain_text("nightly is green")
    expect(page.locator("#pending")).to_be_hidden()
    expect(page.get_by_label("Your answer", exact=True)).to_have_value("")
    assert shown_ids(page) == stored_ids(nightly)

    # Answered elsewhere while this tab was offline: a polite notice, and the page catches up.
    services.set_status(
        conversation=nightly, status="paused", pending_ask={"question": "Rebuild the cache?"}
    )
    expect(page.locator("#pending .question")).to_have_text("Rebuild the cache?")
    page.evaluate("window.murmurDemo.dropConnection(true)")
    expect(page.locator("#connection")).to_have_attribute("data-state", "offline")
    services.set_status(conversation=nightly, status="idle")
    page.get_by_label("Your answer", exact=True).fill("yes")
    page.get_by_role("button", name="Send answer").click()
    expect(page.locator("#notice")).to_contain_text("already answered or withdrawn")
    expect(page.locator("#pending")).to_be_hidden()
    expect(page.locator("#conversation-status")).to_have_text("idle")
    assert not DisplayMessage.objects.filter(
        conversation=nightly, message_type="user", content__text="yes"
    ).exists()
    page.evaluate("window.murmurDemo.restoreConnection()")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    assert shown_ids(page) == stored_ids(nightly)
    context.problems.assert_none("status of 409", "HTTP 409 ")


def test_rename_and_delete_from_the_sidebar(
    server: str, context: WatchedContext, demo_user: User
) -> None:
    from playwright.sync_api import expect

    bisect = Conversation.objects.get(owner=demo_user, external_id="demo-bisect")
    page = context.new_page()
    log_in(page, server)
    open_conversation(page, "git bisect run")
    other = context.new_page()
    other.goto(f"{server}/#{bisect.pk}")
    expect(other.locator("#conversation-title")).to_have_text("git bisect run")

    # Rename: the title becomes an input; Escape leaves everything as it was.
    page.get_by_role("button", name="Rename “git bisect run”").click()
    title = page.get_by_label("New title")
    expect(title).to_be_focused()
    expect(title).to_have_value("git bisect run")
    title.fill("never saved")
    title.press("Escape")
    expect(title).to_have_count(0)
    assert "git bisect run" in sidebar_titles(page)

    # Enter saves: this tab, the other tab's sidebar and its open transcript all follow. A rename
    # is organising: it moves neither the conversation's date nor its place in the list.
    order = sidebar_titles(page)
    page.get_by_role("button", name="Rename “git bisect run”").click()
    page.get_by_label("New title").fill("  Bisecting the nightly  ")
    page.get_by_label("New title").press("Enter")
    renamed = ["Bisecting the nightly" if t == "git bisect run" else t for t in order]
    for tab in (page, other):
        expect(
            tab.locator("#conversations .conversation .title", has_text="Bisecting the nightly")
        ).to_have_count(1)
        expect(tab.locator("#conversation-title")).to_have_text("Bisecting the nightly")
        assert sidebar_titles(tab) == renamed
    bisect.refresh_from_db()
    assert bisect.title == "Bisecting the nightly"

    # Delete asks first; Cancel keeps it.
    page.get_by_role("button", name="Delete “Bisecting the nightly”").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("“Bisecting the nightly”")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert Conversation.objects.filter(pk=bisect.pk).exists()

    # Confirmed: gone from the database, from both sidebars, and from both transcripts.
    page.get_by_role("button", name="Delete “Bisecting the nightly”").click()
    dialog.get_by_role("button", name="Delete", exact=True).click()
    expect(page.locator("#notice")).to_contain_text("Deleted “Bisecting the nightly”")
    for tab in (page, other):
        expect(tab.locator("#conversations .conversation")).to_have_count(1)
        expect(tab.locator("#conversation-title")).to_have_text("Pick a conversation")
        expect(tab.locator("#cards li")).to_have_count(0)
    expect(other.locator("#notice")).to_contain_text("This conversation was deleted.")
    assert page.evaluate("window.location.hash") == ""
    assert not Conversation.objects.filter(pk=bisect.pk).exists()
    assert sidebar_titles(other) == ["Why is the nightly slow?"]
    context.problems.assert_none()


def test_sidebar_reconnect_drops_conversations_deleted_meanwhile(
    server: str, context: WatchedContext, demo_user: User
) -> None:
    from playwright.sync_api import expect

    page = context.new_page()
    log_in(page, server)
    expect(page.locator("#conversations .conversation")).to_have_count(2)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    page.evaluate("window.murmurDemo.dropConnection(true)")
    expect(page.locator("#connection")).to_have_attribute("data-state", "offline")
    services.delete_conversation(
        conversation=Conversation.objects.get(owner=demo_user, external_id="demo-bisect")
    )
    services.start_conversation(owner=demo_user, title="Started while you were away")
    page.evaluate("window.murmurDemo.restoreConnection()")
    expect(page.locator("#conversations .conversation .title")).to_have_text(
        ["Started while you were away", "Why is the nightly slow?"]
    )
    context.problems.assert_none()


TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def test_phone_width_never_scrolls_sideways_and_remote_images_wait(
    server: str, browser: Browser, demo_user: User
) -> None:
    from playwright.sync_api import expect

    word = "unbroken" * 60
    hard = services.start_conversation(owner=demo_user, title="A long title " + "x" * 200)
    services.save_messages(
        conversation=hard,
        messages=[
            {"role": "user", "content": f"See https://example.org/{word}"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "```\nvalue = " + "1 + " * 150 + "1\n```"},
                    {
                        "type": "tool_call",
                        "id": "long-1",
                        "name": "a_tool_with_a_name_" + "y" * 90,
                        "input": {"command": "echo " + "z" * 500},
                    },
                    {"type": "image", "url": "https://images.example.test/chart.png"},
                    {
                        "type": "image",
                        "mime_type": "image/png",
                        "data": base64.b64encode(TINY_PNG).decode(),
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "long-1", "content": "q" * 3000},
        ],
    )
    context = browser.new_context(viewport={"width": 390, "height": 844})
    problems = Problems(context)
    remote: list[str] = []

    def image_host(route: Route) -> None:
        remote.append(route.request.url)
        route.fulfill(status=200, content_type="image/png", body=TINY_PNG)

    context.route("https://images.example.test/**", image_host)
    page = context.new_page()
    log_in(page, server)
    overflow = """() => {
        document.querySelectorAll("details").forEach((box) => { box.open = true; });
        const page = document.documentElement;
        const wide = [...document.querySelectorAll("body *")]
            .filter((node) => node.getBoundingClientRect().right > page.clientWidth + 0.5)
            .map((node) => `${node.tagName}.${node.className}`);
        return {page: page.scrollWidth - page.clientWidth, wide};
    }"""

    # The demo's own conversation, with its pending ask and answer form, fits.
    open_conversation(page, "Why is the nightly slow?")
    expect(page.locator("#pending")).to_be_visible()
    assert page.evaluate(overflow) == {"page": 0, "wide": []}

    # Long words, code, a long tool name and output wrap or scroll inside their cards.
    open_conversation(page, hard.title)
    expect(page.locator("#cards li.card")).to_have_count(len(stored_ids(hard)))
    assert page.evaluate(overflow) == {"page": 0, "wide": []}

    # The remote image is a placeholder: its host hears nothing until the reader asks.
    placeholder = page.locator("#cards figure.remote-image")
    expect(placeholder).to_contain_text("images.example.test")
    expect(page.locator("#cards img.image")).to_have_count(1)  # the inline one
    assert remote == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "demo-phone.png"), animations="disabled")
    placeholder.get_by_role("button", name="Load image from images.example.test").click()
    loaded = page.locator('#cards img[src="https://images.example.test/chart.png"]')
    expect(loaded).to_have_js_property("complete", True)
    assert loaded.evaluate("(img) => img.naturalWidth") == 1
    assert remote == ["https://images.example.test/chart.png"]
    assert page.evaluate(overflow) == {"page": 0, "wide": []}
    problems.assert_none()
    context.close()


def test_times_are_the_conversations_own_in_the_viewers_locale(
    server: str, browser: Browser, demo_user: User
) -> None:
    from playwright.sync_api import expect

    old = services.start_conversation(owner=demo_user, title="Imported from last spring")
    services.save_message(conversation=old, message={"role": "user", "content": "Hello"})
    then = datetime(2023, 3, 4, 5, 6, 7, tzinfo=UTC)
    DisplayMessage.objects.filter(conversation=old).update(created_at=then)
    Conversation.objects.filter(pk=old.pk).update(created_at=then)
    context = browser.new_context(
        viewport={"width": 1280, "height": 860}, locale="de-DE", timezone_id="Asia/Tokyo"
    )
    problems = Problems(context)
    page = context.new_page()
    log_in(page, server)
    open_conversation(page, "Imported from last spring")
    when = page.locator("#cards li.card time.when")
    expect(when).to_have_text("04.03.2023, 14:06")  # 05:06 UTC is 14:06 in Tokyo
    expect(when).to_have_attribute("datetime", "2023-03-04T05:06:07Z")
    expect(page.locator("#conversation-started")).to_have_text("started 04.03.2023, 14:06")
    problems.assert_none()
    context.close()


def test_switching_conversations_during_a_resync_loses_no_event(
    server: str, context: WatchedContext, demo_user: User
) -> None:
    """A resync walk belongs to the view that started it: switching away stops it, and the new
    view's catch-up point stays its own, so its next reconnect misses nothing."""
    from playwright.sync_api import expect

    busy = services.start_conversation(owner=demo_user, title="A busy conversation")
    for n in range(30):  # many events, so its event_seq runs far ahead of the quiet one's
        services.save_message(conversation=busy, message={"role": "user", "content": f"n{n}"})
    quiet = Conversation.objects.get(owner=demo_user, external_id="demo-bisect")
    page = context.new_page()
    log_in(page, server)
    open_conversation(page, "A busy conversation")

    # While the socket is down, more rows change than a replay carries: the page gets a resync,
    # whose walk the test hook holds before its first page.
    page.evaluate("window.murmurDemo.dropConnection(true)")
    expect(page.locator("#connection")).to_have_attribute("data-state", "offline")
    services.save_messages(
        conversation=busy,
        messages=[{"role": "assistant", "content": f"bulk {n}"} for n in range(520)],
    )
    page.evaluate("window.murmurDemo.holdResync()")
    page.evaluate("window.murmurDemo.restoreConnection()")
    page.wait_for_function("() => window.murmurDemo.resyncing() === 1")

    # Switch conversations during the walk, then let the walk go on.
    open_conversation(page, "git bisect run")
    assert shown_ids(page) == stored_ids(quiet)
    page.evaluate("window.murmurDemo.releaseResync()")
    page.evaluate("window.murmurDemo.settled()")
    quiet.refresh_from_db()
    assert page.evaluate("window.murmurDemo.lastEventSeq()") <= quiet.last_event_seq
    assert shown_ids(page) == stored_ids(quiet)

    # The quiet conversation's next reconnect misses nothing.
    page.evaluate("window.murmurDemo.dropConnection(true)")
    expect(page.locator("#connection")).to_have_attribute("data-state", "offline")
    services.save_message(
        conversation=quiet, message={"role": "assistant", "content": "Written during the drop."}
    )
    services.set_status(conversation=quiet, status="running")
    page.evaluate("window.murmurDemo.restoreConnection()")
    expect(page.locator("#cards li.card").last).to_contain_text("Written during the drop.")
    expect(page.locator("#conversation-status")).to_have_text("running")
    assert shown_ids(page) == stored_ids(quiet)

    # Back on the busy one, a resync that runs to its end while live rows keep coming: the
    # catch-up point waits for the walk, then moves to the head.
    open_conversation(page, "A busy conversation")
    page.evaluate("window.murmurDemo.dropConnection(true)")
    expect(page.locator("#connection")).to_have_attribute("data-state", "offline")
    before = page.evaluate("window.murmurDemo.lastEventSeq()")
    services.save_messages(
        conversation=busy,
        messages=[{"role": "assistant", "content": f"more {n}"} for n in range(520)],
    )
    page.evaluate("window.murmurDemo.holdResync()")
    page.evaluate("window.murmurDemo.restoreConnection()")
    page.wait_for_function("() => window.murmurDemo.resyncing() === 1")
    services.save_message(
        conversation=busy, message={"role": "assistant", "content": "Live during the walk."}
    )
    expect(page.locator("#cards li.card").last).to_contain_text("Live during the walk.")
    assert page.evaluate("window.murmurDemo.lastEventSeq()") == before
    page.evaluate("window.murmurDemo.releaseResync()")
    page.evaluate("window.murmurDemo.settled()")
    busy.refresh_from_db()
    assert page.evaluate("window.murmurDemo.lastEventSeq()") == busy.last_event_seq
    shown = shown_ids(page)
    assert shown == stored_ids(busy)[-len(shown) :]
    context.problems.assert_none()


def assert_policy_header(page: Page, base: str) -> None:
    """The admin answers with the demo's policy (settings.CSP_DIRECTIVES)."""
    header = page.request.get(f"{base}/admin/").headers["content-security-policy"]
    assert "script-src 'self'" in header
    assert "style-src 'self'" in header


def test_admin_works_under_the_content_security_policy(
    server: str, context: WatchedContext, demo_user: User
) -> None:
    from playwright.sync_api import expect

    nightly = Conversation.objects.get(owner=demo_user, external_id="demo-nightly")
    bisect = Conversation.objects.get(owner=demo_user, external_id="demo-bisect")
    extra = services.start_conversation(owner=demo_user, title="Delete me from the list")
    page = context.new_page()
    page.goto(f"{server}/admin/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("demo")
    page.get_by_role("button", name="Log in").click()
    conversations = page.locator("#murmur_conversations-conversation").get_by_role("link")
    expect(conversations).to_have_text("Conversations")
    assert_policy_header(page, server)

    # The change list: its script counts the selection, the filter panel is there.
    conversations.click()  # the two demo conversations, the nightly's subagent, the extra one
    expect(page.locator("#result_list tbody tr")).to_have_count(4)
    page.locator("#action-toggle").check()
    expect(page.locator(".action-counter")).to_have_text("4 of 4 selected")
    page.locator("#action-toggle").uncheck()
    expect(page.locator("#changelist-filter")).to_be_visible()

    # A conversation's page: the transcript cards, and the collapsed fieldset opens.
    page.goto(f"{server}/admin/murmur_conversations/conversation/{nightly.pk}/change/")
    expect(page.locator("body")).to_contain_text("Why is the nightly slow?")
    # its subagent is listed and linked; the child's page links back to its parent
    page.get_by_role("link", name="Profile the build steps").click()
    expect(page.get_by_role("link", name=str(nightly.pk))).to_be_visible()
    page.goto(f"{server}/admin/murmur_conversations/conversation/{nightly.pk}/change/")
    metadata = page.locator("details", has_text="Metadata")
    metadata.locator("summary").click()
    expect(metadata).to_have_attribute("open", "")

    # Deleting through the object's page asks for confirmation first.
    page.goto(f"{server}/admin/murmur_conversations/conversation/{bisect.pk}/change/")
    # Django 6 gives the admin's delete link role="button"; 5.2 leaves it a link.
    page.locator("a.deletelink").click()
    expect(page.locator("body")).to_contain_text("Are you sure")
    page.get_by_role("button", name=re.compile("Yes, I.m sure")).click()
    expect(page.locator(".messagelist")).to_contain_text("deleted successfully")
    assert not Conversation.objects.filter(pk=bisect.pk).exists()

    # And through the list's "delete selected" action.
    page.goto(f"{server}/admin/murmur_conversations/conversation/")
    page.locator(f'input.action-select[value="{extra.pk}"]').check()
    expect(page.locator(".action-counter")).to_have_text("1 of 3 selected")
    page.locator("select[name=action]").select_option("delete_selected")
    page.locator('.actions button[name="index"]').click()  # "Go" on Django 5.2, "Run" on 6
    expect(page.locator("body")).to_contain_text("Are you sure")
    page.get_by_role("button", name=re.compile("Yes, I.m sure")).click()
    expect(page.locator(".messagelist")).to_contain_text("Successfully deleted 1")
    assert not Conversation.objects.filter(pk=extra.pk).exists()

    # A script-built widget of Django's own admin: the two-box permission chooser of a group.
    page.goto(f"{server}/admin/auth/group/add/")
    expect(page.locator("#id_permissions_from")).to_be_visible()
    page.locator("#id_permissions_from option").first.click()
    page.locator("#id_permissions_add").click()
    expect(page.locator("#id_permissions_to option")).to_have_count(1)
    context.problems.assert_none()


def test_rate_fork_organise_and_share(
    server: str, browser: Browser, context: WatchedContext, demo_user: User
) -> None:
    """Thumbs on assistant cards (a second tab follows), fork from a card, pin, tag and archive in
    the sidebar, and a share link read by an anonymous browser: a snapshot that does not move,
    then revoked (docs/demo.md)."""
    from playwright.sync_api import expect

    from murmur_conversations.models import Feedback

    nightly = Conversation.objects.get(owner=demo_user, external_id="demo-nightly")
    bisect = Conversation.objects.get(owner=demo_user, external_id="demo-bisect")
    page = context.new_page()
    log_in(page, server)
    open_conversation(page, "Why is the nightly slow?")
    other = context.new_page()
    other.goto(f"{server}/#{nightly.pk}")
    expect(other.locator("#conversation-title")).to_have_text("Why is the nightly slow?")

    # Thumbs up on the last assistant text: pressed here and, through the socket, in the other tab.
    answer = page.locator("#cards li.card.assistant.text").last
    answer.get_by_role("button", name="Good answer").click()
    expect(answer.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    row_id = answer.get_attribute("data-id") or ""
    mirrored = other.locator(f'#cards li.card[data-id="{row_id}"]')
    expect(mirrored.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    assert Feedback.objects.get(display_message_id=int(row_id), user=demo_user).rating == 1
    answer.get_by_role("button", name="Good answer").click()  # again: taken back
    expect(answer.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "false"
    )
    expect(mirrored.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "false"
    )
    assert not Feedback.objects.exists()

    # Fork from the second card: a new conversation opens with the rows up to it.
    second = page.locator("#cards li.card").nth(1)
    at_seq = int(second.get_attribute("data-seq") or 0)
    second.get_by_role("button", name="Fork from here").click()
    expect(page.locator("#notice")).to_contain_text("Forked")
    fork = Conversation.objects.get(forked_from=nightly)
    expect(page).to_have_url(re.compile(f"#{fork.pk}$"))
    expect(page.locator("#cards li.card")).to_have_count(fork.last_seq)
    assert fork.forked_at_seq == at_seq
    assert shown_ids(page) == stored_ids(fork)
    expect(other.locator("#conversations .conversation")).to_have_count(3)

    # Pin bisect: it leads both sidebars. Tag it and filter by a tag; archive the fork.
    page.get_by_role("button", name="Pin “git bisect run”").click()
    for tab in (page, other):
        expect(tab.locator("#conversations .conversation .title").first).to_have_text(
            "git bisect run"
        )
    expect(page.locator("#conversations .conversation").first).to_contain_text("Pinned")
    page.get_by_role("button", name="Edit tags of “git bisect run”").click()
    page.get_by_label("Tags, separated by commas").fill("Work, ci")
    page.get_by_label("Tags, separated by commas").press("Enter")
    expect(page.locator("#conversations .tag-list").first).to_have_text("#work#ci")
    page.get_by_role("button", name="Show conversations tagged work").click()
    expect(page.locator("#conversations .conversation .title")).to_have_text(["git bisect run"])
    page.locator("#tag-filter").get_by_role("button", name="Show all").click()
    expect(page.locator("#conversations .conversation")).to_have_count(3)
    page.get_by_role("button", name="Archive “Why is the nightly slow?”").first.click()
    expect(page.locator("#conversations .conversation")).to_have_count(2)
    page.get_by_role("button", name="Show archived").click()
    expect(page.locator("#conversations .conversation .title")).to_have_count(1)
    page.get_by_role("button", name="Show the list").click()
    expect(page.locator("#conversations .conversation")).to_have_count(2)
    bisect.refresh_from_db()
    assert (bisect.pinned, bisect.tags) == (True, ["work", "ci"])
    assert Conversation.objects.filter(owner=demo_user, archived=True).count() == 1

    # Share the bisect conversation as a snapshot; an anonymous browser reads it.
    open_conversation(page, "git bisect run")
    page.get_by_role("button", name="Share").click()
    dialog = page.locator("#share-dialog")
    dialog.get_by_role("button", name="Create link").click()
    link = dialog.get_by_label("Share link")
    expect(link).to_have_value(re.compile(r"/shared/msh_"))
    url = link.input_value()
    expect(dialog.locator(".share-links li")).to_have_count(1)
    stranger = WatchedContext(browser.new_context(viewport={"width": 390, "height": 844}))
    reader = stranger.new_page()
    reader.goto(url)
    expect(reader.locator("#shared-title")).to_have_text("git bisect run")
    shared_cards = reader.locator("#shared-cards li.card")
    expect(shared_cards).to_have_count(len(stored_ids(bisect)))
    assert "demo" not in reader.locator("body").inner_text()
    services.save_message(conversation=bisect, message={"role": "user", "content": "Later on"})
    reader.reload()
    expect(shared_cards).to_have_count(len(stored_ids(bisect)) - 1)  # a snapshot does not move
    expect(reader.locator("#shared-cards")).not_to_contain_text("Later on")

    # Revoke: the link opens nothing at once.
    dialog.get_by_role("button", name="Revoke the snapshot link").click()
    expect(page.locator("#notice")).to_contain_text("Link revoked")
    reader.reload()
    expect(reader.locator("#shared-problem")).to_contain_text("revoked or has expired")
    expect(shared_cards).to_have_count(0)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "demo-share.png"), animations="disabled")
    dialog.get_by_role("button", name="Close").click()
    stranger.problems.assert_none("status of 404", "HTTP 404 ")
    stranger.context.close()
    context.problems.assert_none()
