"""Settings read on access (conf.py) and the system checks (checks.py), one test per key and id."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.checks import CheckMessage
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from pytest_django import Settings

from murmur_conversations import checks
from murmur_conversations.conf import DEFAULTS, app_settings

README = Path(__file__).resolve().parent.parent / "README.md"


def ids(messages: list[CheckMessage]) -> list[str]:
    return sorted(m.id or "" for m in messages)


def documented_defaults() -> dict[str, object]:
    """The README's settings table: key -> the default it states (a Python literal)."""
    rows = re.findall(r"^\| `([A-Z_]+)` \| [^|]+ \| `([^`]+)`", README.read_text("utf-8"), re.M)
    return {key: ast.literal_eval(value) for key, value in rows}


def test_defaults_are_the_documented_values(settings: Settings) -> None:
    """Every key the app reads is in the README's table with the default the app applies."""
    settings.MURMUR_CONVERSATIONS = {}
    documented = documented_defaults()
    assert set(documented) == set(DEFAULTS)
    assert {key: getattr(app_settings, key) for key in documented} == documented


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("PAGE_SIZE", 20),
        ("MAX_PAGE_SIZE", 40),
        ("HOOKS", {"x": {}}),
        ("SCOPE", "tests.test_conf_and_checks.ids"),
        ("MAX_CONTENT_BYTES", 10),
        ("MAX_METADATA_BYTES", 11),
        ("GROUP_PREFIX", "team"),
        ("DB_TAIL_INTERVAL", 1.5),
        ("FRAME_LOG", False),
        ("FRAME_LOG_RETENTION", 5),
        ("PREPARE_STATEMENTS", False),
    ],
)
def test_each_key_is_read_on_access(settings: Settings, key: str, value: object) -> None:
    settings.MURMUR_CONVERSATIONS = {key: value}
    assert getattr(app_settings, key) == value
    settings.MURMUR_CONVERSATIONS = {}
    assert getattr(app_settings, key) == DEFAULTS[key]


def test_unknown_attribute_raises() -> None:
    with pytest.raises(AttributeError, match="NOPE"):
        _ = app_settings.NOPE


def test_max_page_size_is_capped_by_typed_accessor(settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = {"MAX_PAGE_SIZE": 500}
    assert app_settings.max_page_size == 100


def test_valid_configuration_has_no_messages(settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = {
        "PAGE_SIZE": 10,
        "MAX_PAGE_SIZE": 20,
        "DB_TAIL_INTERVAL": 1,
        "HOOKS": {"recall": {"capabilities": {"conversation": {"read": True}}}},
    }
    assert checks.check_settings() == []


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ([], ["murmur_conversations.E001"]),
        ({"PAGE_SIZE": 0}, ["murmur_conversations.E002"]),
        ({"PAGE_SIZE": "50"}, ["murmur_conversations.E002"]),
        ({"PAGE_SIZE": True}, ["murmur_conversations.E002"]),
        ({"PAGE_SIZE": 60, "MAX_PAGE_SIZE": 50}, ["murmur_conversations.E002"]),
        ({"MAX_PAGE_SIZE": 101}, ["murmur_conversations.E003"]),
        ({"MAX_PAGE_SIZE": 0}, ["murmur_conversations.E003"]),
        (
            {"PAGE_SIZE": 0, "MAX_PAGE_SIZE": 0},
            ["murmur_conversations.E002", "murmur_conversations.E003"],
        ),
        ({"HOOKS": []}, ["murmur_conversations.E004"]),
        ({"HOOKS": {"r": {"capabilities": {"conversation": {}}}}}, ["murmur_conversations.E004"]),
        (
            {"HOOKS": {"r": {"capabilities": {"conversation": {"read": "yes"}}}}},
            ["murmur_conversations.E004"],
        ),
        ({"HOOKS": {"r": {"capabilities": []}}}, ["murmur_conversations.E004"]),
        ({"HOOKS": {"r": "read"}}, ["murmur_conversations.E004"]),
        ({"HOOKS": {"r": {"conversation": {"read": True}}}}, ["murmur_conversations.W003"]),
        (
            {"HOOKS": {"r": {"capabilities": {"memory": {"read": True}}}}},
            ["murmur_conversations.W003"],
        ),
        ({"SCOPE": "no.such.function"}, ["murmur_conversations.E005"]),
        ({"SCOPE": 3}, ["murmur_conversations.E005"]),
        ({"MAX_CONTENT_BYTES": -1}, ["murmur_conversations.E006"]),
        ({"MAX_METADATA_BYTES": 1.5}, ["murmur_conversations.E007"]),
        ({"GROUP_PREFIX": "bad prefix!"}, ["murmur_conversations.E008"]),
        ({"GROUP_PREFIX": ""}, ["murmur_conversations.E008"]),
        ({"DB_TAIL_INTERVAL": 0}, ["murmur_conversations.E009"]),
        ({"DB_TAIL_INTERVAL": "fast"}, ["murmur_conversations.E009"]),
        ({"FRAME_LOG": "yes"}, ["murmur_conversations.E040"]),
        ({"FRAME_LOG_RETENTION": 0}, ["murmur_conversations.E041"]),
        ({"FRAME_LOG_RETENTION": True}, ["murmur_conversations.E041"]),
        ({"PREPARE_STATEMENTS": "no"}, ["murmur_conversations.E050"]),
        ({"PREPARE_STATEMENTS": None}, ["murmur_conversations.E050"]),
        ({"PAGE_SIZ": 10}, ["murmur_conversations.W001"]),
    ],
)
def test_setting_checks(settings: Settings, conf: object, expected: list[str]) -> None:
    settings.MURMUR_CONVERSATIONS = conf
    assert ids(checks.check_settings()) == expected


def test_use_tz_off_is_an_error(settings: Settings) -> None:
    settings.USE_TZ = False
    assert ids(checks.check_use_tz()) == ["murmur_conversations.E010"]


def test_plain_check_refuses_use_tz_off(settings: Settings, db: None) -> None:
    """A plain ``manage.py check`` (no ``--database``) runs the USE_TZ check."""
    settings.USE_TZ = False
    with pytest.raises(SystemCheckError, match=r"murmur_conversations\.E010"):
        call_command("check")


def test_every_check_is_registered_and_every_id_is_documented() -> None:
    from django.core.checks import registry

    ours = {value for name, value in vars(checks).items() if name.startswith("check_")}
    assert ours == {
        checks.check_settings,
        checks.check_use_tz,
        checks.check_database,
        checks.check_search_backend,
        checks.check_ticket_cache,
        checks.check_outage_middleware,
    }
    assert ours <= set(registry.registry.get_checks(include_deployment_checks=True))
    # Settings checks only: a 'database' check may skip itself when no --database is named.
    assert all("database" not in check.tags for check in ours)
    source = Path(checks.__file__).read_text("utf-8")
    used = set(re.findall(r'"murmur_conversations\.([EW]\d{3})"', source))
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
    assert used == {f"E{n:03d}" for n in range(1, 12)} | {
        "W001",
        "W002",
        "W003",
        "W004",
        "W005",
    } | {
        "E020",
        "E021",
        "E040",
        "E041",
        "E050",
        "E030",
        "E031",
        "E032",
        "E033",
        "E034",
        "W020",
        "W034",
        "W035",
    }
    assert {check_id for check_id in used if check_id not in readme} == set()


def test_a_missing_outage_middleware_warns(settings: Settings) -> None:
    assert checks.check_outage_middleware() == []
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != checks.OUTAGE_MIDDLEWARE]
    assert [m.id for m in checks.check_outage_middleware()] == ["murmur_conversations.W005"]


def test_sqlite_without_immediate_transactions_warns() -> None:
    databases = {
        "good": {
            "ENGINE": "django.db.backends.sqlite3",
            "OPTIONS": {"transaction_mode": "IMMEDIATE"},
        },
        "plain": {"ENGINE": "django.db.backends.sqlite3", "OPTIONS": {}},
        "deferred": {
            "ENGINE": "django.db.backends.sqlite3",
            "OPTIONS": {"transaction_mode": "DEFERRED"},
        },
        "pg": {"ENGINE": "django.db.backends.postgresql", "OPTIONS": {}},
    }
    warned = checks.sqlite_warnings(databases)
    assert [m.id for m in warned] == ["murmur_conversations.W002"] * 2
    assert "'plain'" in warned[0].msg and "'deferred'" in warned[1].msg


def test_manage_py_check_fails_on_errors(
    settings: Settings, db: None
) -> None:  # Django 6.1 checks databases too
    settings.MURMUR_CONVERSATIONS = {"MAX_PAGE_SIZE": 1000}
    with pytest.raises(SystemCheckError, match="E003"):
        call_command("check")


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"TICKET_CACHE": "nowhere"}, ["murmur_conversations.E032"]),
        ({"TICKET_CACHE": 5}, ["murmur_conversations.E032"]),
        ({"ACCESS_RECHECK_INTERVAL": 0}, ["murmur_conversations.E033"]),
        ({"ACCESS_RECHECK_INTERVAL": 5}, ["murmur_conversations.E033"]),
        ({"ACCESS_RECHECK_INTERVAL": float("nan")}, ["murmur_conversations.E033"]),
        ({"ACCESS_RECHECK_INTERVAL": True}, ["murmur_conversations.E033"]),
        ({"ACCESS_RECHECK_INTERVAL": 0.5}, []),
    ],
)
def test_access_settings_are_checked(
    settings: Settings, conf: dict[str, object], expected: list[str]
) -> None:
    settings.MURMUR_CONVERSATIONS = conf
    assert ids(checks.check_settings()) == expected


def test_the_ticket_cache_must_keep_and_share_tickets(settings: Settings) -> None:
    """A dummy ticket cache is an error; a local-memory one with a layer that spans processes
    (with DEBUG off) a warning; a shared one, or one process, passes."""
    dummy = {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}
    local = {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "OPTIONS": {"MAX_ENTRIES": 10_000},
    }
    redis_layer = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    settings.CACHES = {"default": dummy}
    assert ids(checks.check_ticket_cache()) == ["murmur_conversations.E034"]
    settings.CACHES = {"default": local}
    settings.DEBUG = False
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "murmur_conversations.realtime.layers.ProcessLocalChannelLayer"}
    }
    assert ids(checks.check_ticket_cache()) == []  # one process: fine
    settings.CHANNEL_LAYERS = redis_layer
    assert ids(checks.check_ticket_cache()) == ["murmur_conversations.W034"]
    settings.DEBUG = True
    assert ids(checks.check_ticket_cache()) == []


@pytest.mark.parametrize(
    "backend", ["locmem.LocMemCache", "filebased.FileBasedCache", "db.DatabaseCache"]
)
def test_a_ticket_cache_left_at_300_entries_is_a_warning(settings: Settings, backend: str) -> None:
    """Django's culling caches keep 300 entries unless told otherwise: the 301st live ticket
    drops earlier ones (W035); a MAX_ENTRIES of the host's choosing, a cache that does not cull,
    or DEBUG on, pass."""
    settings.DEBUG = False
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "murmur_conversations.realtime.layers.ProcessLocalChannelLayer"}
    }
    cache = {"BACKEND": f"django.core.cache.backends.{backend}", "LOCATION": "murmur-w035"}
    settings.CACHES = {"default": cache}
    assert ids(checks.check_ticket_cache()) == ["murmur_conversations.W035"]
    settings.CACHES = {"default": {**cache, "OPTIONS": {"CULL_FREQUENCY": 2}}}
    assert ids(checks.check_ticket_cache()) == ["murmur_conversations.W035"]
    settings.CACHES = {"default": {**cache, "OPTIONS": {"MAX_ENTRIES": 5_000}}}
    assert ids(checks.check_ticket_cache()) == []
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://x",
        }
    }
    assert ids(checks.check_ticket_cache()) == []
    settings.CACHES = {"default": cache}
    settings.DEBUG = True
    assert ids(checks.check_ticket_cache()) == []


@pytest.mark.django_db
def test_the_300_entry_default_really_culls_tickets(settings: Settings) -> None:
    """What W035 warns of, on the real cache: 400 tickets issued into a local-memory cache left
    at its default lose some of the earlier ones; with MAX_ENTRIES raised every one redeems."""
    from django.core.cache import caches

    from murmur_conversations.tickets import issue_ticket, redeem_ticket

    user = get_user_model().objects.create_user("w035")
    for location, options, lost in (
        ("w035-default", {}, True),
        ("w035-raised", {"MAX_ENTRIES": 1_000}, False),
    ):
        settings.CACHES = {
            **settings.CACHES,
            "tickets": {
                "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                "LOCATION": location,
                "OPTIONS": options,
            },
        }
        settings.MURMUR_CONVERSATIONS = {"TICKET_CACHE": "tickets"}
        caches["tickets"].clear()
        tickets = [issue_ticket(user=user, session_key=None) for _ in range(400)]
        redeemed = [redeem_ticket(t) is not None for t in tickets]
        assert (not all(redeemed)) is lost
