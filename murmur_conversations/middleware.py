"""``OutageMiddleware``: an outage of the database (or of another service a view reads, such as a
Redis cache) answers 503 with ``Retry-After``, never 500 (docs/deployment.md "Outages").

Add it last in ``MIDDLEWARE`` (nearest the views, so its answer still passes through the others'
``process_response``). It covers every view: the REST API, the admin and the host's pages.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, Final

from django.http import HttpRequest, HttpResponse, JsonResponse

from murmur_conversations.outage import (
    RETRY_AFTER_SECONDS,
    database_unavailable,
    replace_dead_connections,
    unavailable,
)

__all__ = ["OutageMiddleware", "outage_response"]

logger = logging.getLogger("murmur_conversations.outage")

#: Methods whose request may be run again after a failure: they change nothing (RFC 9110).
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
#: The body of the 503, as the API words its errors (``{"detail", "code"}``).
OUTAGE_BODY: Final = {
    "detail": "A service this request needs is unavailable right now; retry it shortly.",
    "code": "service_unavailable",
}


def outage_response() -> HttpResponse:
    """503 ``{"detail", "code": "service_unavailable"}`` with ``Retry-After`` in seconds."""
    response = JsonResponse(OUTAGE_BODY, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class OutageMiddleware:
    """A view that fails with ``outage.unavailable`` (Django's ``OperationalError`` or
    ``InterfaceError``: the database restarted, is down, or its pool has no connection to give;
    or a Redis or socket error): after a database error the dead connections are replaced
    (``outage.replace_dead_connections``); then a ``GET``/``HEAD``/``OPTIONS`` runs once more (on
    a fresh connection); a write, or a read that fails again, is answered
    :func:`outage_response`. No work at all while the services are healthy."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not unavailable(exception):
            return None
        logger.warning("%s %s: a service failed: %r", request.method, request.path, exception)
        _recover(exception)
        if request.method not in SAFE_METHODS or getattr(request, "_murmur_retried", False):
            return outage_response()
        request._murmur_retried = True  # type: ignore[attr-defined]
        match = request.resolver_match
        if match is None:
            return outage_response()
        try:
            response: Any = match.func(request, *match.args, **match.kwargs)
            if inspect.iscoroutine(response):  # an async view cannot be re-run from here
                response.close()
                return outage_response()
            if callable(getattr(response, "render", None)) and not getattr(
                response, "is_rendered", True
            ):
                response = response.render()
        except Exception as error:
            if not unavailable(error):
                raise
            logger.warning("%s %s: failed again: %r", request.method, request.path, error)
            _recover(error)
            return outage_response()
        result: HttpResponse = response
        return result


def _recover(error: BaseException) -> None:
    if database_unavailable(error):
        replace_dead_connections()
