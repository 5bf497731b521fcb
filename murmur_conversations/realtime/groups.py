"""Channels group names, all built by :func:`group_name` from ``GROUP_PREFIX`` (docs/websocket.md).

Group names may hold only ASCII letters, digits, ``-``, ``_`` and ``.`` and must stay under 100
characters; keys that could break that rule (user primary keys of any type, digests) are hashed.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final, Literal

from murmur_conversations.conf import app_settings

GroupKind = Literal["conversation", "sidebar", "user", "session", "credential", "share"]

_SAFE_KEY: Final = re.compile(r"^[A-Za-z0-9_\-]{1,40}$")


def _key_part(key: object) -> str:
    text = str(key)
    if _SAFE_KEY.match(text):
        return text
    return "h" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def group_name(kind: GroupKind, key: object) -> str:
    """The group of one stream: ``<GROUP_PREFIX>.<kind>.<key>``.

    Kinds: ``conversation`` (key: the conversation UUID; its live events), ``sidebar`` (the owner's
    pk; ``conversation_saved``/``conversation_deleted``), ``user`` (a user's pk; deactivation and
    password changes), ``session`` (a session digest; logout), ``credential`` (``"<model
    label>:<pk>"`` of an API token; its deletion), ``share`` (a share link's id; revocation). A key that is not 1-40 safe
    characters is replaced by a 32-hex digest, so the name is always valid and under 100 characters.
    """
    if kind == "conversation":
        key = getattr(key, "hex", key)  # UUID -> 32 hex, the same for str and UUID inputs
        key = str(key).replace("-", "")
    return f"{app_settings.group_prefix}.{kind}.{_key_part(key)}"
