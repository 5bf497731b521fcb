"""The demo page (host code): the page shell, and a button that plays the demo agent in the server.

The page itself reads only through the app's public API (REST under ``/api/`` and the websockets);
these views render the shell and start :func:`project.demo.agent.run_demo_agent`, which writes
through ``murmur_conversations.services`` as a real runtime would.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.db import close_old_connections, connections
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponsePermanentRedirect,
    HttpResponseRedirect,
    JsonResponse,
)
from django.shortcuts import render
from django.templatetags.static import static
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from murmur_conversations import services
from murmur_conversations.models import Conversation
from project.demo.agent import run_demo_agent

logger = logging.getLogger("project.demo")

#: At most this many demo runs play at once in one server process.
MAX_RUNS = 4
#: The slots of the playing runs (a run holds one while it plays; tests swap in their own).
run_slots = threading.BoundedSemaphore(MAX_RUNS)


def agent_delay() -> float:
    """Seconds between the demo agent's steps: ``MURMUR_DEMO_AGENT_DELAY`` (default 0.15)."""
    try:
        return max(0.0, float(os.environ.get("MURMUR_DEMO_AGENT_DELAY", "0.15")))
    except ValueError:
        return 0.15


@require_GET
@login_required
def index(request: HttpRequest) -> HttpResponse:
    """The demo page: sidebar and transcript, filled in by ``demo/demo.js`` from the API."""
    return render(request, "demo/index.html")


@require_GET
def shared(request: HttpRequest, token: str) -> HttpResponse:
    """The read-only page of a share link (``SHARE_URL`` of the demo settings): a shell that
    ``demo/shared.js`` fills from ``GET /api/shared/<token>/``, which alone decides what the token
    opens. No login needed (a ``require_login`` link asks for one); the token is in the address,
    so the page is neither cached nor named in the ``Referer`` of anything it loads."""
    response = render(request, "demo/shared.html")
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``: where browsers look on pages without an icon link (the admin's); a
    redirect to the demo's icon, so they do not log a 404 on every page."""
    return HttpResponsePermanentRedirect(static("demo/favicon.svg"))


def _play(conversation: Conversation, delay: float) -> None:
    """Thread body: play the scripted run, log a failure, always release DB connections."""
    try:
        close_old_connections()
        run_demo_agent(conversation=conversation, delay=delay)
    except Exception:
        logger.exception("the demo agent run into %s failed", conversation.pk)
    finally:
        connections.close_all()
        run_slots.release()


@require_POST
@login_required
def run_agent(request: HttpRequest) -> HttpResponse:
    """Start the demo agent in a background thread of this server, into a new conversation.

    Answers JSON ``{"conversation_id"}`` (202) to scripts, a redirect to the page otherwise;
    429 when ``MAX_RUNS`` runs are already playing."""
    wants_json = "application/json" in request.headers.get("Accept", "")
    if not run_slots.acquire(blocking=False):
        message = "Several demo runs are already playing; try again in a few seconds."
        if wants_json:
            return JsonResponse({"detail": message}, status=429)
        return HttpResponse(message, status=429, content_type="text/plain")
    try:
        stamp = datetime.now(tz=timezone.get_current_timezone()).strftime("%H:%M:%S")
        conversation = services.start_conversation(
            owner=request.user, title=f"Demo agent run at {stamp}"
        )
        thread = threading.Thread(
            target=_play,
            args=(conversation, agent_delay()),
            name=f"demo-agent-{conversation.pk}",
            daemon=True,
        )
        thread.start()
    except BaseException:
        run_slots.release()
        raise
    if wants_json:
        return JsonResponse({"conversation_id": str(conversation.pk)}, status=202)
    return HttpResponseRedirect(f"{reverse('demo:index')}#{conversation.pk}")
