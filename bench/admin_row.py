"""Admin changelist at two table sizes (docs/benchmarks.md): ours vs a stock ``ModelAdmin``.

Two databases (``<bench>_admin_small`` and ``<bench>_admin_large``, aliases ``admin_small`` and
``admin_large``) are seeded with set-based SQL (``admin_scale.seed``: conversations of 10 or 11
record messages, display rows and a tool call each; about 10k and 1.1M record messages in the full
run), so both sizes run in the same interleaved rounds. A logged-in superuser requests the
conversation and record changelists of our admin (``admin/``) and of ``bench.stock_admin``
(``stock-admin/``) through Django's test client in this process; every answer must be 200.
"""

from __future__ import annotations

from typing import Any

from bench import django_setup
from bench.harness import Benchmark, BenchmarkResult, RatioSpec, Variant, run_benchmark
from bench.stats import Target

PAGES = {
    "conversations": "murmur_conversations/conversation/",
    "record": "murmur_conversations/message/",
}
SITES = {"ours": "/admin/", "stock ModelAdmin": "/stock-admin/"}


def _prepare(alias: str, name: str, params: dict[str, Any], conversations: int, per: int) -> Any:
    """Create, migrate and seed the database of ``alias``; a logged-in client on it."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections
    from django.test import Client

    from bench.admin_scale import seed

    django_setup.recreate_pg_database({**params, "dbname": name})
    django_setup.use_alias(alias)
    try:
        call_command("migrate", database=alias, verbosity=0, interactive=False)
        user = get_user_model().objects.create_superuser("bench-admin", "bench@example.com", "x")
        with connections[alias].cursor() as cursor:
            seed(cursor, conversations, per, user.pk)
        client = Client()
        client.force_login(user)
        return client
    finally:
        django_setup.use_alias("default")


def _count(alias: str) -> int:
    from murmur_conversations.models import Message

    return Message.objects.using(alias).count()


def admin_changelist(
    params: dict[str, Any],
    stages: tuple[tuple[int, int], tuple[int, int]],
    *,
    requests: int,
    rounds: int,
    warmup: int,
) -> BenchmarkResult:
    """The row: both sites' changelists at both sizes, interleaved."""
    small_name, large_name = django_setup.admin_database_names(params)
    clients = {
        "admin_small": _prepare("admin_small", small_name, params, *stages[0]),
        "admin_large": _prepare("admin_large", large_name, params, *stages[1]),
    }
    sizes = {alias: _count(alias) for alias in clients}
    labels = {alias: _size_label(rows) for alias, rows in sizes.items()}
    variants = []
    for site, prefix in SITES.items():
        for page, path in PAGES.items():
            for alias, client in clients.items():
                url = prefix + path

                def get(client: Any = client, url: str = url) -> None:
                    response = client.get(url)
                    if response.status_code != 200:
                        raise RuntimeError(f"{url} answered {response.status_code}")

                variants.append(
                    Variant(
                        f"{site} {page} @{labels[alias]}",
                        django_setup.on_alias(alias, get),
                        requests,
                    )
                )
    small, large = labels["admin_small"], labels["admin_large"]
    ratios = []
    for site in SITES:
        for page in PAGES:
            ratios.append(
                RatioSpec(
                    f"{site} {page}: t({large}) / t({small})",
                    f"{site} {page} @{large}",
                    f"{site} {page} @{small}",
                    "p50",
                    "time",
                    Target("<=", 1.5) if site == "ours" else None,
                )
            )
    for page in PAGES:
        ratios.append(
            RatioSpec(
                f"ours / stock {page} @{large}",
                f"ours {page} @{large}",
                f"stock ModelAdmin {page} @{large}",
                "p50",
                "time",
            )
        )
    benchmark = Benchmark(
        name="admin: changelist",
        description=(
            f"changelist GET (test client, superuser) with {sizes['admin_small']} and "
            f"{sizes['admin_large']} record messages"
        ),
        unit="page",
        variants=variants,
        ratios=ratios,
    )
    result = run_benchmark(benchmark, rounds=rounds, warmup=warmup)
    result.extra["record_rows"] = sizes
    return result


def _size_label(rows: int) -> str:
    if rows >= 1_000_000:
        return f"{rows / 1_000_000:.2g}M"
    return f"{rows / 1000:.3g}k" if rows >= 1000 else str(rows)
