"""The policy every API view shares (docs/api.md) and the conversation lookup.

The app sets its own renderer, negotiation, parser, exception handler, permission and metadata;
only authentication and throttle classes come from the host, read from ``REST_FRAMEWORK`` on each
request (so ``override_settings`` and late configuration work).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, QueryDict
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.metadata import SimpleMetadata
from rest_framework.parsers import JSONParser
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView
from rest_framework.viewsets import ViewSetMixin

from murmur_conversations.api.exceptions import ConversationGone, exception_handler
from murmur_conversations.api.permissions import IsActiveUser
from murmur_conversations.api.renderers import CompactJSONRenderer, FixedContentNegotiation
from murmur_conversations.models import Conversation
from murmur_conversations.selectors import conversation_for


class BoundedJSONParser(JSONParser):
    """DRF's ``JSONParser``, with nesting too deep for the interpreter answered as a parse error
    (400) instead of a ``RecursionError`` (500)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply") from None


class AppRequest(Request):
    """DRF's ``Request`` whose ``POST`` is always empty.

    The app's bodies are JSON, never forms, and each route reads its body itself (``api.params``).
    ``POST`` is what the CSRF check of ``SessionAuthentication`` reads the form token from; were it
    parsed, a body the parsers refuse would answer 415 or 400 before the CSRF check could answer
    403. Cookie clients send the token in the ``X-CSRFToken`` header (docs/api.md "Request bodies").
    """

    @property
    def POST(self) -> QueryDict:  # type: ignore[override]  # DRF stubs: an attribute
        """An empty, immutable ``QueryDict``; the body is never parsed as a form."""
        return QueryDict("", encoding=self._request.encoding)


class AppAPIView(APIView):
    """An ``APIView`` with the app's policies; subclasses add handlers."""

    renderer_classes = (CompactJSONRenderer,)
    parser_classes = (BoundedJSONParser,)
    content_negotiation_class = FixedContentNegotiation
    permission_classes: tuple[type[BasePermission], ...] = (IsActiveUser,)
    metadata_class = SimpleMetadata
    versioning_class = None  # a host versioning scheme would read the query string first

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        """An :class:`AppRequest` (DRF's ``Request`` whose body is never parsed as a form)."""
        return AppRequest(
            request,
            parsers=self.get_parsers(),
            authenticators=self.get_authenticators(),
            negotiator=self.get_content_negotiator(),
            parser_context=self.get_parser_context(request),
        )

    def get_authentication_classes(self) -> list[type[BaseAuthentication]]:
        """The host's ``DEFAULT_AUTHENTICATION_CLASSES``, read per request. Routes that accept
        other credentials (the record route and plug-in hook tokens) extend this list."""
        classes: list[type[BaseAuthentication]] = list(
            api_settings.DEFAULT_AUTHENTICATION_CLASSES  # type: ignore[arg-type]  # imported by DRF
        )
        return classes

    def get_authenticators(self) -> list[BaseAuthentication]:
        """Instances of :meth:`get_authentication_classes`; the first one decides 401 vs 403."""
        return [auth() for auth in self.get_authentication_classes()]

    def get_throttles(self) -> list[BaseThrottle]:
        """The host's ``DEFAULT_THROTTLE_CLASSES``, read per request."""
        classes: list[type[BaseThrottle]] = list(
            api_settings.DEFAULT_THROTTLE_CLASSES  # type: ignore[arg-type]  # imported by DRF
        )
        return [throttle() for throttle in classes]

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        """The app's handler: ``{"detail", "code"}`` bodies (``api.exceptions``)."""
        return exception_handler

    def check_method_allowed(self, request: Request) -> None:
        """``MethodNotAllowed`` (405 with ``Allow``) for a verb this route has no handler for,
        before anything depends on the id."""
        method = (request.method or "").lower()
        if method not in self.http_method_names or not hasattr(self, method):
            raise exceptions.MethodNotAllowed(request.method or "")


class ConversationScopedViewSet(ViewSetMixin, AppAPIView):
    """A viewset whose detail routes carry a conversation id (URL kwarg ``id``).

    ``initial`` resolves it through ``selectors.conversation_for`` right after authentication,
    permission, throttling and the 405 check, and before a handler reads any query parameter:
    foreign, missing and malformed ids raise the same ``ConversationGone`` (404). The handler
    finds the conversation in ``self.conversation``, except those of :attr:`scoped_reads`, whose
    one statement is the lookup (they answer the same 404, also before a bad parameter's 400).
    """

    lookup_url_kwarg = "id"
    #: Routes whose read is the scoped lookup too (``reading.scoped_page``: the page statement
    #: checks the scope): ``initial`` leaves the lookup to them.
    scoped_reads: frozenset[str] = frozenset()
    conversation: Conversation

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """DRF's checks, then the 405 check, then the scoped lookup (one query; none for the
        routes of :attr:`scoped_reads`)."""
        super().initial(request, *args, **kwargs)
        self.check_method_allowed(request)
        if self.lookup_url_kwarg in kwargs and self.action not in self.scoped_reads:
            conversation = conversation_for(request.user, kwargs[self.lookup_url_kwarg])
            if conversation is None:
                raise ConversationGone()
            self.conversation = conversation
