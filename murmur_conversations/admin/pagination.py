"""Counting for changelists over millions of rows (docs/admin.md).

An unfiltered list on PostgreSQL shows the planner's estimate (``pg_class.reltuples``) instead of
``COUNT(*)``; every other list counts at most ``count_cap + 1`` rows. Together with
``show_full_result_count = False`` a changelist never scans a whole table to count it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property

if TYPE_CHECKING:
    PaginatorBase: TypeAlias = Paginator[Any]
else:
    PaginatorBase = Paginator

#: What a changelist's count is: ``exact``, ``estimate`` (planner statistics) or ``capped``.
EXACT, ESTIMATE, CAPPED = "exact", "estimate", "capped"


def estimated_rows(queryset: QuerySet[Any]) -> int | None:
    """The planner's row estimate of ``queryset``'s table on PostgreSQL (``pg_class.reltuples``);
    None on other databases and for a table never analysed (reltuples < 0)."""
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    table = connection.ops.quote_name(queryset.model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", [table])
        row = cursor.fetchone()
    if row is None or row[0] is None or row[0] < 0:
        return None
    return int(row[0])


class EstimatedCountPaginator(PaginatorBase):
    """A paginator whose ``count`` takes one cheap query whatever the table size.

    Unfiltered querysets with an estimate of at least ``estimate_threshold`` rows use the estimate;
    everything else counts at most ``count_cap`` rows (``SELECT COUNT(*) FROM (... LIMIT cap+1)``),
    so the pages beyond the cap are not offered: narrow the search instead. ``count_kind`` says
    which one the count is (:data:`EXACT`, :data:`ESTIMATE` or :data:`CAPPED`).
    """

    estimate_threshold: ClassVar[int] = 10_000
    count_cap: ClassVar[int] = 10_000

    def __init__(self, object_list: Any, per_page: int | str, *args: Any, **kwargs: Any) -> None:
        super().__init__(object_list, per_page, *args, **kwargs)
        self.count_kind = EXACT

    @cached_property
    def count(self) -> int:
        """The number of rows to paginate: exact, estimated or capped (see the class)."""
        objects = self.object_list
        if not isinstance(objects, QuerySet):
            return super().count
        if not objects.query.has_filters():
            estimate = estimated_rows(objects)
            if estimate is not None and estimate >= self.estimate_threshold:
                self.count_kind = ESTIMATE
                return estimate
        counted = objects.order_by().values("pk")[: self.count_cap + 1].count()
        if counted > self.count_cap:
            self.count_kind = CAPPED
            return self.count_cap
        return counted
