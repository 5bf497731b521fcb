"""Plug-in hook tokens over HTTP (docs/hooks.md): ``Authorization: MurmurHook <token>``.

A request using the ``MurmurHook`` scheme is a hook request only: a bad or expired token is 401
``authentication_failed`` with ``WWW-Authenticate: MurmurHook`` (no other credentials are tried);
a valid token names one conversation and one hook, whose grant is checked again on every read.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from murmur_conversations.hooks import HookToken, verify_token

SCHEME = "MurmurHook"


class NotGranted(exceptions.PermissionDenied):
    """403 ``not_granted``: the hook's entry in ``HOOKS`` does not grant ``conversation.read``."""

    default_code = "not_granted"
    default_detail = "This hook is not granted conversation.read."


class MurmurHookAuthentication(BaseAuthentication):
    """DRF authentication for hook tokens from ``hooks.issue_token``.

    Returns ``(AnonymousUser(), HookToken)`` for a valid token, None when the request does not use
    the ``MurmurHook`` scheme, and raises ``AuthenticationFailed`` for a malformed, forged or
    expired token.
    """

    def authenticate(self, request: Request) -> tuple[Any, HookToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].decode("latin-1").lower() != SCHEME.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid MurmurHook header: expected one token.")
        token = verify_token(parts[1].decode("latin-1"))
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or expired hook token.")
        return AnonymousUser(), token

    def authenticate_header(self, request: Request) -> str:
        return SCHEME


def hook_token(request: Request) -> HookToken | None:
    """The verified hook token of a hook request, else None."""
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, HookToken) else None


class IsActiveUserOrHook(BasePermission):
    """A signed-in active user, or a request carrying a verified hook token."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if hook_token(request) is not None:
            return True
        user = request.user
        return bool(user is not None and user.is_authenticated and getattr(user, "is_active", True))
