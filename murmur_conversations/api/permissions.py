"""The API's one permission (docs/api.md): a signed-in, active user. What that user may
read is decided by ``selectors.conversations_for`` (the ``SCOPE`` setting), never here."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request


class IsActiveUser(BasePermission):
    """Allows an authenticated, active user; DRF answers others with ``not_authenticated``
    (no credentials) after the host's authenticators ran."""

    def has_permission(self, request: Request, view: Any) -> bool:
        """True for an authenticated user whose ``is_active`` is not False."""
        user = request.user
        return bool(user is not None and user.is_authenticated and getattr(user, "is_active", True))
