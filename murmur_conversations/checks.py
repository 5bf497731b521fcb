"""System checks for murmur_conversations (ids ``murmur_conversations.E0xx`` / ``W0xx``).

A misconfiguration fails ``manage.py check`` instead of the first request. The README's settings
table maps every ``MURMUR_CONVERSATIONS`` key to its check id. Every check reads settings only and
none is tagged ``database``: Django runs ``database`` checks against the databases named with
``check --database`` (none by default before Django 6.0), and a plain ``check`` must run these.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils.module_loading import import_string

from murmur_conversations import search_index
from murmur_conversations.conf import DEFAULTS, MAX_PAGE_SIZE_CEILING, SETTING_NAME
from murmur_conversations.prices import REQUIRED_PRICE_KEYS, parse_price

# Channels accepts group names of ASCII letters, digits, hyphens, underscores and periods.
_GROUP_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,40}$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _error(check_id: str, msg: str, hint: str) -> Error:
    return Error(msg, hint=hint, id=check_id)


def _warning(check_id: str, msg: str, hint: str) -> Warning:
    return Warning(msg, hint=hint, id=check_id)


@register(Tags.compatibility)
def check_settings(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Validate every ``MURMUR_CONVERSATIONS`` key (E001-E009, E011, E020, E021, E030, E031,
    W001, W020)."""
    conf = getattr(settings, SETTING_NAME, {})
    if not isinstance(conf, dict):
        return [
            _error(
                "murmur_conversations.E001",
                f"{SETTING_NAME} must be a dict, not {type(conf).__name__}.",
                f"Set {SETTING_NAME} = {{...}} with the keys listed in the README.",
            )
        ]
    messages: list[CheckMessage] = []
    for key in sorted(set(conf) - set(DEFAULTS)):
        messages.append(
            _warning(
                "murmur_conversations.W001",
                f"{SETTING_NAME} has an unknown key {key!r}; it is ignored.",
                f"Known keys: {', '.join(DEFAULTS)}.",
            )
        )
    value = {**DEFAULTS, **conf}

    page_size, max_page_size = value["PAGE_SIZE"], value["MAX_PAGE_SIZE"]
    if not _is_int(max_page_size) or not 1 <= max_page_size <= MAX_PAGE_SIZE_CEILING:
        messages.append(
            _error(
                "murmur_conversations.E003",
                f"MAX_PAGE_SIZE must be an integer from 1 to "
                f"{MAX_PAGE_SIZE_CEILING}, not {max_page_size!r}.",
                "It may be lowered from 100, never raised.",
            )
        )
        max_page_size = MAX_PAGE_SIZE_CEILING
    if not _is_int(page_size) or not 1 <= page_size <= max_page_size:
        messages.append(
            _error(
                "murmur_conversations.E002",
                f"PAGE_SIZE must be an integer from 1 to MAX_PAGE_SIZE "
                f"({max_page_size}), not {page_size!r}.",
                "The default is 50.",
            )
        )
    messages.extend(_check_hooks(value["HOOKS"]))
    messages.extend(_check_scope(value["SCOPE"]))
    for check_id, key in (
        ("murmur_conversations.E006", "MAX_CONTENT_BYTES"),
        ("murmur_conversations.E007", "MAX_METADATA_BYTES"),
    ):
        if not _is_int(value[key]) or value[key] < 1:
            messages.append(
                _error(
                    check_id,
                    f"{key} must be a positive integer (bytes), not {value[key]!r}.",
                    f"The default is {DEFAULTS[key]}.",
                )
            )
    prefix = value["GROUP_PREFIX"]
    if not isinstance(prefix, str) or not _GROUP_PREFIX_RE.match(prefix):
        messages.append(
            _error(
                "murmur_conversations.E008",
                f"GROUP_PREFIX must be 1-40 ASCII letters, digits, '-', '_' or "
                f"'.', not {prefix!r}.",
                "Channels group names allow only those characters.",
            )
        )
    messages.extend(_check_prices(value["PRICES"]))
    interval = value["DB_TAIL_INTERVAL"]
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not interval > 0:
        messages.append(
            _error(
                "murmur_conversations.E009",
                f"DB_TAIL_INTERVAL must be a positive number of seconds, not {interval!r}.",
                "The default is 0.25.",
            )
        )
    messages.extend(_check_frame_log(value["FRAME_LOG"], value["FRAME_LOG_RETENTION"]))
    if not isinstance(value["PREPARE_STATEMENTS"], bool):
        messages.append(
            _error(
                "murmur_conversations.E050",
                f"PREPARE_STATEMENTS must be True or False, not {value['PREPARE_STATEMENTS']!r}.",
                "The default is True; False behind a transaction-mode PgBouncer "
                '(docs/write-path.md "Prepared statements").',
            )
        )
    messages.extend(_check_redact(value["REDACT"]))
    retention = value["RETENTION_DAYS"]
    if retention is not None and (not _is_int(retention) or not 1 <= retention <= 999_999_999):
        messages.append(
            _error(
                "murmur_conversations.E021",
                f"RETENTION_DAYS must be None or a whole number of days from 1 to 999999999, "
                f"not {retention!r}.",
                "The default is None: conversations are kept until deleted.",
            )
        )
    messages.extend(_check_sharing(value["PRIVATE_TOOLS"], value["SHARE_URL"]))
    messages.extend(_check_access(value["TICKET_CACHE"], value["ACCESS_RECHECK_INTERVAL"]))
    return messages


def _check_frame_log(enabled: Any, retention: Any) -> list[CheckMessage]:
    """FRAME_LOG: a bool (E040); FRAME_LOG_RETENTION: a positive number of seconds (E041)."""
    messages: list[CheckMessage] = []
    if not isinstance(enabled, bool):
        messages.append(
            _error(
                "murmur_conversations.E040",
                f"FRAME_LOG must be True or False, not {enabled!r}.",
                'The default is True (docs/websocket.md "The frame log").',
            )
        )
    if (
        isinstance(retention, bool)
        or not isinstance(retention, int | float)
        or not 0 < retention <= 10**9  # a timedelta holds up to ~2.7 million years
    ):
        messages.append(
            _error(
                "murmur_conversations.E041",
                f"FRAME_LOG_RETENTION must be a number of seconds in (0, 1e9], not {retention!r}.",
                "The default is 60.",
            )
        )
    return messages


def _check_access(ticket_cache: Any, recheck: Any) -> list[CheckMessage]:
    """TICKET_CACHE names a configured cache (E032); ACCESS_RECHECK_INTERVAL is a number of
    seconds in (0, 4] (E033). docs/security.md."""
    messages: list[CheckMessage] = []
    if not isinstance(ticket_cache, str) or ticket_cache not in settings.CACHES:
        messages.append(
            _error(
                "murmur_conversations.E032",
                f"TICKET_CACHE must name an entry of CACHES, not {ticket_cache!r}.",
                'The default is "default" (docs/deployment.md "Tickets").',
            )
        )
    if isinstance(recheck, bool) or not isinstance(recheck, int | float) or not 0 < recheck <= 4:
        messages.append(
            _error(
                "murmur_conversations.E033",
                f"ACCESS_RECHECK_INTERVAL must be a number of seconds in (0, 4], not {recheck!r}.",
                "The default is 2.0: a socket closes within 5 seconds of losing access.",
            )
        )
    return messages


@register(Tags.compatibility, Tags.caches)
def check_ticket_cache(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Websocket tickets need a cache that keeps what it is given (E034: the dummy cache keeps
    nothing, so no ticket could ever be redeemed; W035: a local-memory, file or database cache
    left at Django's default ``MAX_ENTRIES`` of 300 culls tickets once more are alive) and that
    every process shares: with a channel layer that spans processes (W034), a local-memory ticket
    cache only works when the process that issues a ticket is the one its socket reaches
    (docs/deployment.md "Tickets"). The warnings are left out with ``DEBUG`` on."""
    from murmur_conversations.realtime import layer_is_process_local

    user = getattr(settings, "MURMUR_CONVERSATIONS", {})
    name = user.get("TICKET_CACHE", "default") if isinstance(user, dict) else "default"
    backend = str(settings.CACHES.get(name, {}).get("BACKEND", "")) if isinstance(name, str) else ""
    if backend.endswith(".DummyCache"):
        return [
            _error(
                "murmur_conversations.E034",
                f"The ticket cache {name!r} is Django's dummy cache: no websocket ticket could "
                "ever be redeemed.",
                "Point TICKET_CACHE at a real cache (Redis, Memcached, database, file).",
            )
        ]
    if settings.DEBUG:
        return []
    messages: list[CheckMessage] = []
    if backend.endswith(".LocMemCache"):
        try:
            spans_processes = not layer_is_process_local()
        except Exception:  # a misconfigured layer is reported by Channels itself
            spans_processes = False
        if spans_processes:
            messages.append(
                _warning(
                    "murmur_conversations.W034",
                    f"The ticket cache {name!r} is a local-memory cache but the channel layer "
                    "spans processes: a ticket issued by one process cannot be redeemed by "
                    "another.",
                    "Use a shared cache (Redis, Memcached, database) for TICKET_CACHE.",
                )
            )
    options = settings.CACHES[name].get("OPTIONS") if backend else None
    if backend.endswith(_CULLING_CACHES) and "MAX_ENTRIES" not in (
        options if isinstance(options, dict) else {}
    ):
        messages.append(
            _warning(
                "murmur_conversations.W035",
                f"The ticket cache {name!r} keeps Django's default of 300 entries and culls the "
                "rest: when more websocket tickets than that are alive (each lives 60 seconds), "
                "earlier ones are dropped and their sockets close 4401.",
                f'Set CACHES["{name}"]["OPTIONS"]["MAX_ENTRIES"] above the tickets issued per '
                "minute at your peak plus the cache's other entries, or use Redis or Memcached.",
            )
        )
    return messages


#: Django's cache backends that hold at most ``MAX_ENTRIES`` entries (300 unless set) and cull.
_CULLING_CACHES = (".LocMemCache", ".FileBasedCache", ".DatabaseCache")


def _check_sharing(private_tools: Any, share_url: Any) -> list[CheckMessage]:
    """PRIVATE_TOOLS: a list of tool names (E030); SHARE_URL: None or a template with
    ``{token}`` (E031)."""
    messages: list[CheckMessage] = []
    if not isinstance(private_tools, list | tuple) or not all(
        isinstance(name, str) and name for name in private_tools
    ):
        messages.append(
            _error(
                "murmur_conversations.E030",
                f"PRIVATE_TOOLS must be a list of tool names, not {private_tools!r}.",
                'Example: ["bash", "read_secret"]; ["*"] keeps every tool\'s arguments private.',
            )
        )
    if share_url is not None and (not isinstance(share_url, str) or "{token}" not in share_url):
        messages.append(
            _error(
                "murmur_conversations.E031",
                f"SHARE_URL must be None or a string containing '{{token}}', not {share_url!r}.",
                'Example: "https://chat.example.com/shared/{token}/".',
            )
        )
    return messages


def _check_redact(conf: Any) -> list[CheckMessage]:
    """REDACT: a dict of the keys of ``redaction.REDACT_DEFAULTS`` whose patterns compile with RE2
    (E020, W020). Compiling it is the check: the same code builds it on the first write."""
    from murmur_conversations import redaction

    if not isinstance(conf, dict):
        return [
            _error(
                "murmur_conversations.E020",
                f"REDACT must be a dict, not {type(conf).__name__}.",
                f"Keys: {', '.join(redaction.REDACT_DEFAULTS)}.",
            )
        ]
    messages: list[CheckMessage] = [
        _warning(
            "murmur_conversations.W020",
            f"REDACT has an unknown key {key!r}; it is ignored.",
            f"Known keys: {', '.join(redaction.REDACT_DEFAULTS)}.",
        )
        for key in sorted(set(conf) - set(redaction.REDACT_DEFAULTS), key=str)
    ]
    values = redaction.settings_of(conf)
    problems: list[str] = []
    for key in ("ENABLED", "PII"):
        if not isinstance(values[key], bool):
            problems.append(f"REDACT['{key}'] must be True or False, not {values[key]!r}.")
    detectors = values["DETECTORS"]
    if detectors is not None and (
        not isinstance(detectors, list | tuple) or not all(isinstance(d, str) for d in detectors)
    ):
        problems.append("REDACT['DETECTORS'] must be None or a list of detector names.")
    if not isinstance(values["PATTERNS"], dict):
        problems.append("REDACT['PATTERNS'] must be a dict of detector name to RE2 regex.")
    if not isinstance(values["ALLOW"], list | tuple):
        problems.append("REDACT['ALLOW'] must be a list of RE2 regexes.")
    region = values["PII_REGION"]
    if region is not None and not (
        isinstance(region, str) and len(region) == 2 and region.isupper()
    ):
        problems.append(
            f"REDACT['PII_REGION'] must be None or a region code like 'US', not {region!r}."
        )
    if values["PII"] is True:
        try:
            import phonenumbers  # noqa: F401
        except ImportError:
            problems.append(
                "REDACT['PII'] needs the phonenumbers package (murmur-conversations[pii])."
            )
    if not problems:
        try:
            redaction.build(conf)
        except ImproperlyConfigured as error:
            problems.append(str(error))
    messages.extend(
        _error(
            "murmur_conversations.E020",
            problem,
            f"Detectors: {', '.join(redaction.SECRET_DETECTORS)}; patterns use RE2 syntax "
            "(no backreferences or lookarounds) and must not match the empty string.",
        )
        for problem in problems
    )
    return messages


def _check_hooks(hooks: Any) -> list[CheckMessage]:
    """HOOKS: ``{name: {"capabilities": {"conversation": {"read": bool}}}}`` (E004, W003)."""
    if not isinstance(hooks, dict):
        return [
            _error(
                "murmur_conversations.E004",
                f"HOOKS must be a dict of hook name to declaration, not {type(hooks).__name__}.",
                'Example: {"recall": {"capabilities": {"conversation": {"read": True}}}}.',
            )
        ]
    messages: list[CheckMessage] = []
    for name, declaration in hooks.items():
        where = f"HOOKS[{name!r}]"
        if not isinstance(name, str) or not name or not isinstance(declaration, dict):
            messages.append(
                _error(
                    "murmur_conversations.E004",
                    f"{where} must map a non-empty name to a dict.",
                    'Example: {"capabilities": {"conversation": {"read": True}}}.',
                )
            )
            continue
        for key in sorted(set(declaration) - {"capabilities"}, key=str):
            messages.append(
                _warning(
                    "murmur_conversations.W003",
                    f"{where} has an unknown key {key!r}; it is ignored.",
                    "Grants belong under 'capabilities'.",
                )
            )
        capabilities = declaration.get("capabilities", {})
        if not isinstance(capabilities, dict):
            messages.append(
                _error(
                    "murmur_conversations.E004",
                    f"{where}['capabilities'] must be a dict.",
                    'Example: {"conversation": {"read": True}}.',
                )
            )
            continue
        for key in sorted(set(capabilities) - {"conversation"}, key=str):
            messages.append(
                _warning(
                    "murmur_conversations.W003",
                    f"{where}['capabilities'] has an unknown key {key!r}; "
                    "it is ignored (not granted).",
                    "The only capability is 'conversation'.",
                )
            )
        block = capabilities.get("conversation")
        if block is not None and (
            not isinstance(block, dict) or not isinstance(block.get("read"), bool)
        ):
            messages.append(
                _error(
                    "murmur_conversations.E004",
                    f"{where}['capabilities']['conversation'] must have a boolean 'read'.",
                    'Write {"read": True} to grant, {"read": False} to deny.',
                )
            )
    return messages


def _check_prices(prices: Any) -> list[CheckMessage]:
    """PRICES: ``{model: {"input", "output", "cache_read", "cache_write"[, "cache_write_1h"]}}``
    in USD per million tokens as ints, Decimals or decimal strings, or ``{model: None}`` (E011)."""
    hint = (
        'Example: {"my-model": {"input": "3", "output": "15", "cache_read": "0.30", '
        '"cache_write": "3.75"}} (USD per million tokens; strings, not floats), or '
        '{"my-model": None} for no price.'
    )
    if not isinstance(prices, dict):
        return [
            _error(
                "murmur_conversations.E011",
                f"PRICES must be a dict of model name to prices, not {type(prices).__name__}.",
                hint,
            )
        ]
    messages: list[CheckMessage] = []
    for model, entry in prices.items():
        if not isinstance(model, str) or not model:
            messages.append(
                _error("murmur_conversations.E011", f"PRICES has a key {model!r}.", hint)
            )
        elif entry is not None and parse_price(entry) is None:
            messages.append(
                _error(
                    "murmur_conversations.E011",
                    f"PRICES[{model!r}] must be None or an object with "
                    f"{', '.join(REQUIRED_PRICE_KEYS)} (and optionally cache_write_1h), each a "
                    f"non-negative int, Decimal or decimal string; got {entry!r}.",
                    hint,
                )
            )
    return messages


def _check_scope(path: Any) -> list[CheckMessage]:
    """SCOPE: a dotted path to a callable (E005)."""
    if isinstance(path, str):
        try:
            if callable(import_string(path)):
                return []
        except ImportError:
            pass
    return [
        _error(
            "murmur_conversations.E005",
            f"SCOPE must be the dotted path of a function (user -> QuerySet of "
            f"Conversation), not {path!r}.",
            f"The default is {DEFAULTS['SCOPE']!r}.",
        )
    ]


@register(Tags.compatibility)
def check_use_tz(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """USE_TZ must be on (E010)."""
    if settings.USE_TZ:
        return []
    return [
        _error(
            "murmur_conversations.E010",
            "USE_TZ is off; murmur_conversations orders and reports times "
            "in UTC and needs aware datetimes.",
            "Set USE_TZ = True.",
        )
    ]


#: The middleware that answers an outage 503 + Retry-After (docs/deployment.md "Outages").
OUTAGE_MIDDLEWARE = "murmur_conversations.middleware.OutageMiddleware"


@register(Tags.compatibility)
def check_outage_middleware(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """W005 when ``MIDDLEWARE`` lacks :data:`OUTAGE_MIDDLEWARE` (a database restart would answer
    500)."""
    if OUTAGE_MIDDLEWARE in getattr(settings, "MIDDLEWARE", []):
        return []
    return [
        _warning(
            "murmur_conversations.W005",
            f"{OUTAGE_MIDDLEWARE} is not in MIDDLEWARE: a request that meets a connection a "
            "database restart killed answers 500 instead of being retried or answered 503.",
            f'Add "{OUTAGE_MIDDLEWARE}" last in MIDDLEWARE (docs/deployment.md "Outages").',
        )
    ]


@register(Tags.compatibility)
def check_database(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """SQLite should use immediate transactions (W002), read from ``DATABASES`` (no connection)."""
    return sqlite_warnings({alias: connections.settings[alias] for alias in connections})


@register(Tags.compatibility)
def check_search_backend(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """W004 for each database without a full-text index (docs/search.md): not PostgreSQL, and not
    SQLite with FTS5. Read from ``DATABASES`` and the sqlite3 module (no connection)."""
    return search_warnings({alias: connections.settings[alias] for alias in connections})


def search_warnings(databases: dict[str, dict[str, Any]]) -> list[CheckMessage]:
    """W004 for each database of ``databases`` whose search would fall back to ``icontains``."""
    messages: list[CheckMessage] = []
    for alias, conf in databases.items():
        engine = str(conf.get("ENGINE", ""))
        # Django's engines, PostGIS and SpatiaLite included, by the vendor they connect as.
        if "postgis" in engine or "postgresql" in engine:
            vendor = "postgresql"
        elif "sqlite" in engine or "spatialite" in engine:
            vendor = "sqlite"
        else:
            vendor = engine.rsplit(".", 1)[-1]
        if search_index.backend_for(vendor) == "fallback":
            what = "SQLite without FTS5" if vendor == "sqlite" else f"the {engine or '?'} backend"
            messages.append(
                _warning(
                    "murmur_conversations.W004",
                    f"Database {alias!r} ({what}) has no full-text index: search falls back "
                    "to icontains, without stemming or ranking, and reads every row in scope.",
                    "Use PostgreSQL, or SQLite built with FTS5 (docs/search.md).",
                )
            )
    return messages


def sqlite_warnings(databases: dict[str, dict[str, Any]]) -> list[CheckMessage]:
    """W002 for each SQLite database whose OPTIONS lack ``transaction_mode: IMMEDIATE``."""
    messages: list[CheckMessage] = []
    for alias, conf in databases.items():
        if conf.get("ENGINE") != "django.db.backends.sqlite3":
            continue
        mode = str(conf.get("OPTIONS", {}).get("transaction_mode", "")).upper()
        if mode not in {"IMMEDIATE", "EXCLUSIVE"}:
            messages.append(
                _warning(
                    "murmur_conversations.W002",
                    f"SQLite database {alias!r} does not use immediate transactions; concurrent "
                    "writers may fail with 'database is locked'.",
                    f"Set DATABASES[{alias!r}]['OPTIONS'] = {{'transaction_mode': 'IMMEDIATE', "
                    "'timeout': 20}.",
                )
            )
    return messages
