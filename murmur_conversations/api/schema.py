"""OpenAPI annotations through drf-spectacular when it is installed, a no-op otherwise.

drf-spectacular is the demo's schema generator (``[demo]`` extra), not a requirement of the app:
this module is the only place that imports it, and only when a view is decorated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: ``(name, type, where, description)`` of a documented parameter.
Param = tuple[str, type, Literal["query", "path"], str]

ID_PARAM: Param = ("id", str, "path", "The conversation id: a canonical lowercase UUID.")
LIMIT_PARAM: Param = (
    "limit",
    str,
    "query",
    "Rows per page; default PAGE_SIZE, clamped to 1..MAX_PAGE_SIZE.",
)
CURSOR_PARAM: Param = ("cursor", str, "query", "The next_cursor of the previous page.")


def document(
    *,
    summary: str,
    responses: dict[Any, Any],
    params: list[Param] | None = None,
    request: Any = None,
) -> Callable[[F], F]:
    """``drf_spectacular.utils.extend_schema`` with these responses (keyed by status, or by
    ``(status, media type)`` for a route with several), parameters and request body;
    the identity when drf-spectacular is not installed."""
    try:
        from drf_spectacular.utils import OpenApiParameter, extend_schema
    except ImportError:  # pragma: no cover - the app runs without drf-spectacular
        return lambda view: view
    parameters = [
        OpenApiParameter(name, kind, location=where, description=text, required=where == "path")
        for name, kind, where, text in params or []
    ]
    decorator = extend_schema(
        summary=summary, responses=responses, parameters=parameters, request=request
    )
    return decorator


def free_form(kind: Literal["json", "text"]) -> Any:
    """The schema of a body without a serializer: drf-spectacular's ``OpenApiTypes.ANY`` (any
    JSON value) or ``OpenApiTypes.STR`` (text); None when drf-spectacular is not installed."""
    try:
        from drf_spectacular.types import OpenApiTypes
    except ImportError:  # pragma: no cover - the app runs without drf-spectacular
        return None
    return OpenApiTypes.ANY if kind == "json" else OpenApiTypes.STR
