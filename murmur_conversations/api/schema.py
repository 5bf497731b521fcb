"""OpenAPI annotations through drf-spectacular when it is installed, a no-op otherwise.

drf-spectacular is the demo's schema generator (``[demo]`` extra), not a requirement of the app:
this module is the only place that imports it (when it is installed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, NamedTuple, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class Param(NamedTuple):
    """A documented parameter: its ``name``, ``kind`` (a Python type, or a JSON schema dict
    that states what the server accepts: enums, patterns, limits), where it goes, its
    description, and whether it is required (path parameters always are)."""

    name: str
    kind: Any
    where: Literal["query", "path"]
    text: str
    required: bool = False


def choice(*values: str) -> dict[str, Any]:
    """The schema of a query parameter that takes one of ``values``; empty means absent, as the
    server reads every optional parameter (``params.query_value``)."""
    return {"type": "string", "enum": ["", *values]}


#: A search query as the server reads it (``search.parse_query``): no NUL, not blank.
QUERY_PATTERN: Final = r"^[^\x00]*[^\s\x00][^\x00]*$"

ID_PARAM = Param("id", str, "path", "The conversation id: a canonical lowercase UUID.")
LIMIT_PARAM = Param(
    "limit",
    str,
    "query",
    "Rows per page; default PAGE_SIZE, clamped to 1..MAX_PAGE_SIZE.",
)
CURSOR_PARAM = Param("cursor", str, "query", "The next_cursor of the previous page.")


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
        OpenApiParameter(
            p.name,
            p.kind,
            location=p.where,
            description=p.text,
            required=p.required or p.where == "path",
        )
        for p in params or []
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


def _register_body_shapes() -> None:
    """Have drf-spectacular write ``additionalProperties: false`` for every
    ``serializers.ClosedSerializer`` (the server refuses another key with 400), and a ``oneOf``
    of its variants for every ``serializers.OneOfSerializer`` (with the keys every variant
    requires, so the body itself is required)."""
    try:
        from drf_spectacular.extensions import OpenApiSerializerExtension
    except ImportError:  # pragma: no cover - the app runs without drf-spectacular
        return

    class ClosedBody(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]
        target_class = "murmur_conversations.api.serializers.ClosedSerializer"
        match_subclasses = True

        def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
            schema = auto_schema._map_basic_serializer(self.target, direction)
            schema["additionalProperties"] = False
            return schema

    class OneOfBody(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]
        target_class = "murmur_conversations.api.serializers.OneOfSerializer"
        match_subclasses = True

        def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
            variants = [
                auto_schema.resolve_serializer(variant(), direction)
                for variant in self.target.variants
            ]
            required = set.intersection(*(set(v.schema.get("required", ())) for v in variants))
            return {"required": sorted(required), "oneOf": [v.ref for v in variants]}


_register_body_shapes()
