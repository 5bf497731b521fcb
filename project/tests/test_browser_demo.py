"""The demo page in a real browser (docs/demo.md): Playwright drives Debian's Chromium against a real
uvicorn server on loopback that serves the test database. Log in, open a conversation, see the
cards; run the demo agent and watch text stream in and tool badges change; drop and restore the
connection and find nothing lost; page older rows on scroll; a second tab's sidebar stays live.

Skipped unless ``CHROMIUM_PATH`` is set (``.ci/run`` sets it). Browsers are never downloaded.
A screenshot is kept under ``test-artifacts/``.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connections
from playwright.sync_api import Browser, Page
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


def log_in(page: Page, base: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("demo")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#conversations button.conversation").first).to_be_visible()


def shown_ids(page: Page) -> list[str]:
    ids: list[str] = page.locator("#cards li.card").evaluate_all(
        "(cards) => cards.map((c) => c.dataset.id)"
    )
    return ids


def stored_ids(conversation: Conversation) -> list[str]:
    rows = DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
    return [str(pk) for pk in rows.values_list("pk", flat=True)]


def test_live_page_streams_badges_and_catches_up(
    server: str, browser: Browser, demo_user: User
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, server)

    # Open a conversation: its cards, in seq order, exactly the stored rows.
    nightly = Conversation.objects.get(owner=demo_user, external_id="demo-nightly")
    page.get_by_role("button", name=re.compile("Why is the nightly slow")).click()
    expect(page.locator("#conversation-title")).to_have_text("Why is the nightly slow?")
    expect(page.locator("#cards li.card")).to_have_count(len(stored_ids(nightly)))
    assert shown_ids(page) == stored_ids(nightly)
    expect(page.locator("#cards li.thinking details")).to_have_count(1)
    expect(page.locator("#cards li.thinking details")).not_to_have_attribute("open", "")
    expect(page.locator("#pending .question")).to_contain_text("Pin image-tools<3")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")

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
    badges = page.locator("#cards li.tool-call [data-role=tool-status]")
    expect(badges).to_have_text(["completed", "completed", "failed"])
    histories = page.locator("#cards li.tool-call").evaluate_all(
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
    assert errors == []
    context.close()


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
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    log_in(page, server)
    page.get_by_role("button", name=re.compile("A long conversation")).click()
    cards = page.locator("#cards li.card")
    expect(cards).to_have_count(50)
    expect(cards.last).to_have_text(re.compile("message number 130$"))
    for expected in (100, 130):
        page.locator("#transcript").evaluate("(box) => { box.scrollTop = 0; }")
        expect(cards).to_have_count(expected)
    expect(cards.first).to_have_text(re.compile("message number 1$"))
    assert shown_ids(page) == stored_ids(long)
