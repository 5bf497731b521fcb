"""Redaction at write time (docs/write-path.md "Redaction"): secrets are replaced by
``[REDACTED:<detector>]`` before anything is stored.

:func:`redact` is the one entry point. The services call it on every text that enters the store:
message content, extra keys and tool arguments (in ``messages.normalize_message``), synthetic
display rows, tool results, errors and display texts, titles, metadata, pending asks and answers,
source records' raw lines (``source_line=True``) and streamed text. Frames, exports and the search
index are made from the stored rows, so they never see a secret either.

Detection:

- the token detectors of ``bc-detect-secrets`` (the maintained fork of Yelp's ``detect-secrets``):
  AWS, GitHub, Slack, Stripe, SendGrid, Twilio, Mailchimp, npm, Discord, Square, Artifactory keys,
  JWTs (checked with the library's own ``is_formally_valid``) and credentials in URLs. Their
  regular expressions (``denylist``, public class attributes) are compiled once with RE2, not run
  through the library's line scanner: RE2 matches in time linear in the text, so a 10 MB tool
  result is scanned in bounded time whatever it holds (Python's ``re`` needs quadratic time on
  some inputs for the library's JWT pattern);
- a few token shapes the library lacks and agent logs are full of (OpenAI, Anthropic, Google,
  GitHub fine-grained, GitLab, Hugging Face), in :data:`EXTRA_DETECTORS`;
- private keys: a PEM block is replaced whole, from its ``BEGIN`` line to its ``END`` line (to the
  end of its base64 body when the ``END`` line is missing);
- ``keyword-secret``: a value of at least 8 characters and Shannon entropy >= 3 bits per character
  after a keyword (``password=``, ``api_key:``, ``"token": "..."``...), or under a JSON key that
  names one, unless the library's heuristics (templates, ``$VARIABLES``, UUIDs, sequences) say it
  is not a secret;
- the host's own ``PATTERNS`` (RE2 syntax) and, when ``PII`` is on, e-mail addresses, card
  numbers (Luhn-checked) and phone numbers (``phonenumbers``, Google's libphonenumber).

Replacement is in place: the rest of a text and the JSON structure are kept; object keys are
redacted like values. In a record (``redact(record=True)``: a message, a display row's content, a
source line), values of the identity keys in :data:`IDENTITY_KEYS` (message and call ids, which
are the de-duplication identity) and values opaque by the provider's format (:data:`OPAQUE_KEYS`,
base64 ``data``, ``data:`` URLs) are never touched; below a key of :data:`CONTENT_KEYS` (tool
arguments and results, metadata) they are content again. Text cut short or arriving in pieces
keeps no prefix of a secret (:meth:`Redactor.cut_text`, :class:`Pieces`); text is redacted before
it is cut (:func:`redact_and_cut`). Redaction is deterministic and
idempotent: markers already in a text are never matched again, and the passes repeat until nothing
is found, so ``redact(redact(x)) == redact(x)``. Counts per detector come back with the value;
the services add them to the conversation's ``RedactionCount`` rows in the same write.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, NamedTuple, TypeVar

import re2
from detect_secrets.filters import heuristic
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from murmur_conversations import jsonenc
from murmur_conversations.conf import SETTING_NAME, app_settings
from murmur_conversations.jsonenc import clean_text

T = TypeVar("T")

#: ``[REDACTED:<detector>]``; detector names are 1-40 lowercase letters, digits and hyphens.
MARKER_PREFIX: Final = "[REDACTED:"
DETECTOR_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_MARKER: Final = re.compile(r"\[REDACTED:[a-z0-9][a-z0-9-]{0,39}\]")
#: Values under these keys are identities the provider or the writer issued (message, call and
#: source ids, roles, block types): never redacted in a record (``redact(record=True)``), so
#: de-duplication and the links between calls and results never change. Below a key of
#: :data:`CONTENT_KEYS`, and in a value that is content throughout (metadata), they are content.
IDENTITY_KEYS: Final = frozenset(
    {"id", "role", "type", "tool_call_id", "tool_use_id", "call_id", "source_id"}
)
#: Keys whose value a tool or a person wrote, whatever its shape (tool arguments and results,
#: Claude Code's ``toolUseResult``, metadata, a pending ask's ``pauseData``): below them no key is
#: an identity and no value is opaque but base64 media.
CONTENT_KEYS: Final = frozenset(
    {"input", "arguments", "result", "output", "toolUseResult", "metadata", "pauseData"}
)
#: Values opaque by the provider's format, kept byte for byte in a record (docs/security.md):
#: thinking ``signature`` (Anthropic) and reasoning ``encrypted_content`` (OpenAI, Codex).
OPAQUE_KEYS: Final = frozenset({"signature", "encrypted_content"})
#: Block or source types whose ``data`` is opaque: ``redacted_thinking`` (encrypted reasoning) and
#: ``base64`` (an image's or a document's bytes); a ``data`` beside ``mime_type`` or
#: ``media_type`` with no ``type`` (a display row's image) is base64 media too.
OPAQUE_DATA_TYPES: Final = frozenset({"redacted_thinking", "base64"})
_MEDIA_KEYS: Final = ("mime_type", "media_type")
#: A ``data:`` URL of base64 media (OpenAI ``image_url.url``, Codex ``input_image``): kept whole.
_DATA_URL: Final = re.compile(
    r"data:[A-Za-z0-9.+/-]{1,100}(?:;[A-Za-z0-9.=-]{1,100}){0,4};base64,[A-Za-z0-9+/=\s]*"
)
#: Opaque values in a source line that is not JSON (cut off): their spans are never replaced.
_OPAQUE_IN_TEXT: Final = re.compile(
    r'"(?:signature|encrypted_content)"\s*:\s*"[A-Za-z0-9+/=_-]*'
    r'|"type"\s*:\s*"(?:base64|redacted_thinking)"[^{}"]*(?:"[^{}"]*"[^{}"]*){0,6}?"data"\s*:\s*"[A-Za-z0-9+/=]*'
    rf"|{_DATA_URL.pattern}"
)
#: No detector finds anything shorter.
_MIN_SECRET: Final = 8
#: Passes over one text at most; each pass only replaces unprotected text, so two always suffice
#: in practice, and the bound keeps a pathological host pattern from looping.
_MAX_PASSES: Final = 8
#: Longest PEM block replaced from BEGIN to END (a 16,384-bit RSA key is about 13 KB).
_MAX_PEM: Final = 64 * 1024

#: The settings keys of ``MURMUR_CONVERSATIONS["REDACT"]`` with their defaults (README "Settings").
REDACT_DEFAULTS: Final[dict[str, Any]] = {
    "ENABLED": True,
    "DETECTORS": None,  # None: every built-in secret detector; else a list of names
    "PATTERNS": {},  # host detectors: {name: RE2 regex}
    "ALLOW": [],  # RE2 regexes; a detected secret that fully matches one is kept
    "PII": False,  # e-mail addresses, card numbers, phone numbers
    "PII_REGION": None,  # phonenumbers region for numbers without +country (None: + only)
}


class Redacted(NamedTuple, Generic[T]):
    """What :func:`redact` returns: the value as it may be stored, and the number of secrets
    replaced per detector name (empty when nothing was found)."""

    value: T
    counts: dict[str, int]


@dataclass(frozen=True)
class Detector:
    """One detector: ``name`` (the marker's), an RE2 ``pattern`` and an optional ``check`` a
    candidate must pass. What is replaced: with ``groups``, the capture groups that took part in
    the match (the library's rule for patterns that match a keyword before the secret); else the
    group named ``secret`` when the pattern has one (host patterns); else the whole match without
    surrounding quotes, blanks, ``=`` and ``:``."""

    name: str
    pattern: str
    check: Callable[[str], bool] | None = None
    groups: bool = False


def _library(
    name: str,
    regex: re.Pattern[str],
    check: Callable[[str], bool] | None = None,
    *,
    groups: bool = False,
) -> Detector:
    """A detector from a ``bc-detect-secrets`` plugin's compiled ``denylist`` entry; its flags
    become RE2 inline flags (``IGNORECASE``; ``VERBOSE`` patterns there have no blanks)."""
    pattern = regex.pattern
    if regex.flags & re.IGNORECASE:
        pattern = f"(?i:{pattern})"
    return Detector(name, pattern, check, groups)


def _jwt_valid(token: str) -> bool:
    return bool(JwtTokenDetector.is_formally_valid(token))


def _library_detectors() -> tuple[Detector, ...]:
    return (
        _library("aws-access-key", AWSKeyDetector.denylist[0]),
        _library("aws-secret-key", AWSKeyDetector.denylist[1], groups=True),
        _library("github-token", GitHubTokenDetector.denylist[0]),
        _library("slack-token", SlackDetector.denylist[0]),
        _library("slack-webhook", SlackDetector.denylist[1]),
        _library("jwt", JwtTokenDetector.denylist[0], _jwt_valid),
        _library("stripe-key", StripeDetector.denylist[0]),
        _library("sendgrid-key", SendGridDetector.denylist[0]),
        _library("twilio-key", TwilioKeyDetector.denylist[0]),
        _library("twilio-key", TwilioKeyDetector.denylist[1]),
        _library("mailchimp-key", MailchimpDetector.denylist[0]),
        _library("npm-token", NpmDetector.denylist[0], groups=True),
        _library("discord-token", DiscordBotTokenDetector.denylist[0]),
        _library("square-oauth", SquareOAuthDetector.denylist[0]),
        _library("artifactory-token", ArtifactoryDetector.denylist[0]),
        _library("artifactory-token", ArtifactoryDetector.denylist[1], groups=True),
        _library("basic-auth", BasicAuthDetector.denylist[0], groups=True),
    )


#: Token shapes not in the library (RE2 syntax), common in agent logs.
EXTRA_DETECTORS: Final = (
    Detector("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{32,}"),
    Detector("openai-key", r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}"),
    Detector("openai-key", r"\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}\b"),
    Detector("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    Detector("github-token", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    Detector("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    Detector("huggingface-token", r"\bhf_[A-Za-z0-9]{30,40}\b"),
)

PRIVATE_KEY: Final = "private-key"
#: The marker of what may be the start of a secret, in text cut short (``Redactor.cut_text``).
PARTIAL: Final = "partial"
#: Alphabets of the continuations tried after a text cut short (``Redactor.open_at``).
_FILLERS: Final = ("Xq7Lm2Pz9Rt4Kw8Nv3Bj6Hd1Gs5Fc0Yh", "Q7L2P9R4K8N3B6H1", "q7l2p9r4k8n3b6h1")
#: The longest last word of a text cut short that may be the start of a secret.
_OPEN_TAIL: Final = 1024
#: How far before its last word a secret's keyword may stand.
_OPEN_CONTEXT: Final = 100


def last_word(text: str) -> int | None:
    """Where the run of non-blank characters that ends ``text`` begins (``len(text)`` when it
    ends with a blank); None when that run is longer than :data:`_OPEN_TAIL` characters."""
    word = len(text)
    while word > 0 and not text[word - 1].isspace():
        word -= 1
        if len(text) - word > _OPEN_TAIL:
            return None
    return word


@functools.cache
def _continuations() -> tuple[str, ...]:
    """Every continuation ``open_at`` tries: each alphabet to each length of 1 to 40 characters
    followed by a blank (detectors that end at a word boundary), and to 600 characters."""
    out: list[str] = []
    for alphabet in _FILLERS:
        long = alphabet * (600 // len(alphabet) + 1)
        out.extend(long[:length] + " " for length in range(1, 41))
        out.append(long[:600])
    return tuple(out)


KEYWORD: Final = "keyword-secret"
#: Every built-in secret detector name, in the order their stages run.
SECRET_DETECTORS: Final = (
    PRIVATE_KEY,
    *dict.fromkeys(d.name for d in (*_library_detectors(), *EXTRA_DETECTORS)),
    KEYWORD,
)
PII_DETECTORS: Final = ("email", "card-number", "phone")

_PEM_BEGIN: Final = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END: Final = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# The body of a key whose END line is missing: lines of base64 or of headers (Proc-Type: ...).
_PEM_BODY: Final = re.compile(
    r"(?:[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z-]{1,40}:[^\r\n\\]{0,200})?(?:\r?\n|\\n))*"
    r"[ \t]*[A-Za-z0-9+/=]*"
)

_KEYWORDS: Final = (
    r"passw(?:or)?d|passphrase|pwd|secret|token|api[_.-]?key|apikey|access[_.-]?key|"
    r"auth[_.-]?key|private[_.-]?key|client[_.-]?secret|credentials?"
)
_KEYWORD_PATTERN: Final = (
    rf"(?i:(?:{_KEYWORDS})[a-z0-9_.-]{{0,30}}[\"']?[ \t]{{0,3}}(?:=>|:=|=|:)[ \t]{{0,3}})"
    r"(?:\"([^\"\\\r\n]{8,512})\"|'([^'\\\r\n]{8,512})'|([^\s\"'`,;<>\[\](){}]{8,512}))"
)
_RE2_OPTIONS: Final = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad host pattern is reported once, by the system check


def _re2(pattern: str) -> Any:
    """``pattern`` compiled with RE2 (``re2.error`` when it does not compile)."""
    return re2.compile(pattern, _RE2_OPTIONS)


_KEYWORD_KEY: Final = re.compile(rf"(?:{_KEYWORDS})", re.IGNORECASE)
_ENTROPY: Final = 3.0
_DIGIT: Final = re.compile(r"[0-9]")

_EMAIL: Final = (
    r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}"
)
_CARD: Final = r"\b[2-6][0-9](?:[ -]?[0-9]){11,17}\b"


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text`` (0.0 for the empty string)."""
    if not text:
        return 0.0
    length = len(text)
    return -sum(n / length * math.log2(n / length) for n in Counter(text).values())


def looks_secret(value: str) -> bool:
    """Whether a value found behind a keyword is redacted: at least 8 characters, entropy >= 3
    bits per character, not a marker, a number, a path or URL, and not what the library's
    heuristics call a template, a ``$VARIABLE``, a UUID or a sequence."""
    if len(value) < _MIN_SECRET or MARKER_PREFIX in value or value.isdigit():
        return False
    if value.startswith(("/", "./", "~/", "http://", "https://", "%", "{{", "<")):
        return False
    if shannon_entropy(value) < _ENTROPY:
        return False
    return not (
        heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_potential_uuid(value)
        or heuristic.is_sequential_string(value)
        or heuristic.is_not_alphanumeric_string(value)
    )


def _luhn(number: str) -> bool:
    digits = [int(c) for c in number if c.isdigit()]
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return 13 <= len(digits) <= 19 and total % 10 == 0


class _Stage:
    """Detectors compiled into one RE2 alternation (leftmost-first, one linear pass)."""

    def __init__(self, detectors: Iterable[Detector], allow: Any) -> None:
        self.detectors = list(detectors)
        self.allow = allow
        parts = []
        #: per detector: its wrapper group index and its inner group indices
        self.groups: list[tuple[int, range]] = []
        index = 1
        for detector in self.detectors:
            compiled = _re2(detector.pattern)
            if detector.groups:
                replaced = range(index + 1, index + 1 + compiled.groups)
            elif "secret" in compiled.groupindex:
                replaced = range(
                    index + compiled.groupindex["secret"], index + compiled.groupindex["secret"] + 1
                )
            else:
                replaced = range(0)
            parts.append(f"({detector.pattern})")
            self.groups.append((index, replaced))
            index += 1 + compiled.groups
        self.regex = _re2("|".join(parts)) if parts else None

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """``(start, end, detector)`` of every secret in ``text``."""
        if self.regex is None:
            return []
        found: list[tuple[int, int, str]] = []
        for match in self.regex.finditer(text):
            for detector, (wrapper, inner) in zip(self.detectors, self.groups, strict=True):
                if match.start(wrapper) < 0:
                    continue
                spans = [
                    match.span(g)
                    for g in inner
                    if match.start(g) >= 0 and match.end(g) > match.start(g)
                ]
                if not spans:
                    spans = [_trim(text, *match.span(wrapper))]
                for start, end in spans:
                    secret = text[start:end]
                    if end - start < 1 or (
                        detector.check is not None and not detector.check(secret)
                    ):
                        continue
                    if self.allow is not None and self.allow.fullmatch(secret):
                        continue
                    found.append((start, end, detector.name))
                break
        return found


_TRIM: Final = " \t\r\n\"'=:`"


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in _TRIM:
        start += 1
    while end > start and text[end - 1] in _TRIM:
        end -= 1
    return start, end


class Redactor:
    """The compiled detectors of one ``REDACT`` setting. Use :func:`redact`; build one with
    :func:`build` (``ImproperlyConfigured`` for a setting the checks would refuse)."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        self.enabled = bool(conf["ENABLED"])
        wanted = conf["DETECTORS"]
        names = set(SECRET_DETECTORS if wanted is None else wanted)
        allow_patterns = list(conf["ALLOW"])
        self.allow = _re2("|".join(f"(?:{p})" for p in allow_patterns)) if allow_patterns else None
        self.pem = PRIVATE_KEY in names
        # One stage per host pattern: their group names may repeat (``secret``).
        host = [[Detector(name, pattern)] for name, pattern in dict(conf["PATTERNS"]).items()]
        builtin = [d for d in (*_library_detectors(), *EXTRA_DETECTORS) if d.name in names]
        self.keyword = KEYWORD in names
        stages = [*host, builtin]
        if self.keyword:
            stages.append([Detector(KEYWORD, _KEYWORD_PATTERN, looks_secret, groups=True)])
        self.pii = bool(conf["PII"])
        self.pii_region = conf["PII_REGION"]
        if self.pii:
            stages.append([Detector("email", _EMAIL), Detector("card-number", _CARD, _luhn)])
        self.stages = [_Stage(stage, self.allow) for stage in stages if stage]
        # One pass over a text with no candidate at all decides most texts.
        sniff = [_unnamed(d.pattern) for stage in self.stages for d in stage.detectors]
        if self.pem:
            sniff.append(_PEM_BEGIN.pattern)
        self.sniff = _re2("|".join(f"(?:{p})" for p in sniff)) if sniff else None

    # ------------------------------------------------------------------ one text

    def text(
        self, text: str, counts: Counter[str], *, protect: re.Pattern[str] | None = None
    ) -> str:
        """``text`` with its secrets replaced; adds what it replaced to ``counts``. Spans of
        ``protect`` (and of ``data:`` URLs of base64 media) are never replaced. Text UTF-8
        cannot encode is repaired first (:func:`_matchable`): RE2 reads UTF-8."""
        if len(text) < _MIN_SECRET:
            return text
        text = _matchable(text)
        if protect is None and "data:" in text:
            protect = _DATA_URL
        for _ in range(_MAX_PASSES):
            if not self._candidate(text):
                return text
            redone = self._pass(text, counts, protect)
            if redone == text:
                return text
            text = redone
        return text

    def _candidate(self, text: str) -> bool:
        if self.sniff is not None and self.sniff.search(text) is not None:
            return True
        return self.pii and _DIGIT.search(text) is not None

    def _pass(self, text: str, counts: Counter[str], protect: re.Pattern[str] | None) -> str:
        if self.pem:
            text = self._segments(text, self._pem, counts, protect)
        for stage in self.stages:
            text = self._segments(text, stage.find, counts, protect)
        if self.pii:
            text = self._segments(text, self._phones, counts, protect)
        return text

    def _segments(
        self,
        text: str,
        find: Callable[[str], list[tuple[int, int, str]]],
        counts: Counter[str],
        protect: re.Pattern[str] | None = None,
    ) -> str:
        """Apply ``find`` to ``text``, leaving markers (and spans of ``protect``) alone: a span
        that overlaps one is dropped, so a marker is never matched again (the idempotence of
        docs/write-path.md) and an opaque value is never cut into."""
        spans = find(text)
        if not spans:
            return text
        guarded = [m.span() for m in _MARKER.finditer(text)] if MARKER_PREFIX in text else []
        if protect is not None:
            guarded = _merged([*guarded, *(m.span() for m in protect.finditer(text))])
        if guarded:
            spans = _outside(spans, guarded)
        return _replace(text, spans, counts)

    def _pem(self, text: str) -> list[tuple[int, int, str]]:
        """PEM private keys, BEGIN line to END line (to the end of the base64 body when the END
        line is missing, comes after the next BEGIN or is too far). Linear: the searches for the
        next BEGIN and the next END each only move forward."""
        found: list[tuple[int, int, str]] = []
        end: re.Match[str] | None = None
        no_end_from = len(text) + 1  # no END line starts at or after this position
        begin = _PEM_BEGIN.search(text)
        while begin is not None:
            following = _PEM_BEGIN.search(text, begin.end())
            if (end is None or end.start() < begin.end()) and begin.end() < no_end_from:
                end = _PEM_END.search(text, begin.end())
                if end is None:
                    no_end_from = begin.end()
            if (
                end is not None
                and end.start() >= begin.end()
                and (following is None or end.start() < following.start())
                and end.end() - begin.start() <= _MAX_PEM
            ):
                stop = end.end()
            else:
                body = _PEM_BODY.match(text, begin.end())
                stop = begin.end() if body is None else body.end()
            found.append((begin.start(), stop, PRIVATE_KEY))
            if following is not None and following.start() < stop:
                following = _PEM_BEGIN.search(text, stop)
            begin = following
        return found

    def _phones(self, text: str) -> list[tuple[int, int, str]]:
        import phonenumbers

        found = []
        matcher = phonenumbers.PhoneNumberMatcher(
            text, self.pii_region or "ZZ", leniency=phonenumbers.Leniency.VALID, max_tries=1000
        )
        for match in matcher:
            if self.allow is None or not self.allow.fullmatch(match.raw_string):
                found.append((match.start, match.end, "phone"))
        return found

    # ------------------------------------------------------------------ text cut short

    def open_at(self, text: str) -> int | None:
        """Where a secret ``text`` may stop inside begins (None: nowhere): the start of a match
        of any detector (its keyword included) that reaches the end of ``text`` when it goes on
        with some made-up continuation (letters and digits, capitals and digits, lower case and
        digits; of each length up to 40 characters and then a blank, or 600 characters). Only
        the last word and the 100 characters before it are tried."""
        word = last_word(text)
        if word is None:
            return None
        base = max(0, word - _OPEN_CONTEXT)
        tail = text[base:]
        plain = word == len(text) or _PLAIN_WORD.fullmatch(text, word) is not None
        if plain and not (self.keyword and _KEYWORD_KEY.search(tail)):
            # a word of prose (or none), no keyword waiting for its value: at most the few
            # public lower-case letters a token starts with (``ghp``, ``sk``) end the text
            return None
        starts = []
        for continuation in _continuations():
            probe = tail + continuation
            for stage in self.stages:
                if stage.regex is None:
                    continue
                for match in stage.regex.finditer(probe):
                    if match.start() < len(tail) < match.end():
                        starts.append(match.start())
                        break
                    if match.start() >= len(tail):
                        break
        return base + min(starts) if starts else None

    def crossing(self, text: str, boundary: int) -> int:
        """The end of the furthest secret found in ``text`` that begins before ``boundary`` and
        ends after it (0: none): the part of a secret a piece starting at ``boundary`` holds."""
        spans = self._pem(text) if self.pem else []
        for stage in self.stages:
            spans.extend(stage.find(text))
        return max((end for start, end, _ in spans if start < boundary < end), default=0)

    def cut_text(self, text: str, counts: Counter[str]) -> str:
        """A text that stops mid-way (a piece of one arriving in pieces): redacted, and a secret
        it may stop inside replaced from its start (``[REDACTED:partial]``)."""
        text = self.text(text, counts)
        start = self.open_at(text)
        if start is None or (start < len(text) and _inside_marker(text, start)):
            return text
        counts[PARTIAL] += 1
        return f"{text[:start]}{MARKER_PREFIX}{PARTIAL}]"

    # ------------------------------------------------------------------ JSON values

    def value(
        self,
        value: Any,
        counts: Counter[str],
        key: str | None = None,
        *,
        record: bool = False,
        cut: bool = False,
    ) -> Any:
        """A JSON value with every string and every object key redacted (numbers and structure
        kept). ``record``: the value is in a provider's or the writer's message format, so strings
        under :data:`IDENTITY_KEYS` and opaque values (:data:`OPAQUE_KEYS`, ``data`` of
        :data:`OPAQUE_DATA_TYPES`) are kept byte for byte, until a key of :data:`CONTENT_KEYS`
        makes everything below it content. Base64 media (a ``data:`` URL, the ``data`` of a
        ``base64`` source) is kept in content too. A string under a keyword key (``password``,
        ``api_key``...) that looks secret (:func:`looks_secret`) is replaced whole. ``cut``: its
        strings stop mid-way (:meth:`cut_text`)."""
        if isinstance(value, str):
            if _DATA_URL.fullmatch(value):
                return value
            # JSON held as text (OpenAI function.arguments) is redacted as JSON: its escapes
            # would hide secrets from the text detectors.
            if value[:1] in ("{", "["):
                text = self.line(value, counts, record=record, cut=cut)
            elif cut:
                text = self.cut_text(value, counts)
            else:
                text = self.text(value, counts)
            if (
                self.keyword
                and key is not None
                and text == value
                and _KEYWORD_KEY.search(key)
                and looks_secret(value)
                and not (self.allow is not None and self.allow.fullmatch(value))
            ):
                counts[KEYWORD] += 1
                return f"{MARKER_PREFIX}{KEYWORD}]"
            return text
        if isinstance(value, dict):
            return self._object(value, counts, record=record, cut=cut)
        if isinstance(value, list):
            return [self.value(item, counts, key, record=record, cut=cut) for item in value]
        return value

    def _object(
        self, value: dict[str, Any], counts: Counter[str], *, record: bool, cut: bool
    ) -> Any:
        kept = _opaque_members(value, record=record)
        out: dict[str, Any] = {}
        for key, member in value.items():
            name = self._key(key, counts, value, out)
            if isinstance(member, str) and (key in kept or (record and key in IDENTITY_KEYS)):
                out[name] = member
            else:
                out[name] = self.value(
                    member, counts, key, record=record and key not in CONTENT_KEYS, cut=cut
                )
        return out

    def _key(
        self, key: str, counts: Counter[str], given: dict[str, Any], out: dict[str, Any]
    ) -> str:
        """An object key with its secrets replaced; a redacted key that would meet another key
        gets `` (2)``, `` (3)``... so no member is lost."""
        name = self.text(key, counts)
        if name == key:
            return key
        unique, number = name, 1
        while unique in given or unique in out:
            number += 1
            unique = f"{name} ({number})"
        return unique

    def line(
        self, raw: str, counts: Counter[str], *, record: bool = True, cut: bool = False
    ) -> str:
        """A stored source line (or JSON held as text): kept byte for byte unless it holds a
        secret; a JSON line that does is parsed, redacted as a JSON value (``record``: as a
        record, the default for source lines) and written back as compact JSON (``jsonenc``,
        ``ensure_ascii=False``), so a second redaction keeps it as it is. A line that is not JSON
        (cut off) is redacted as text, its opaque values (``"signature": "..."``, base64
        ``data``, ``data:`` URLs) left alone. ``cut``: the line's texts stop mid-way, so each
        string's end is redacted as text cut short (:meth:`cut_text`), secret or not."""
        raw = _matchable(raw)
        probe = raw.replace('\\"', '"').replace("\\/", "/") if "\\" in raw else raw
        if not cut and (len(raw) < _MIN_SECRET or not self._candidate(probe)):
            return raw
        try:
            parsed = jsonenc.loads(raw)
        except (ValueError, RecursionError):
            return self.text(raw, counts, protect=_OPAQUE_IN_TEXT)
        if not isinstance(parsed, dict | list):
            return self.text(raw, counts, protect=_OPAQUE_IN_TEXT)
        found: Counter[str] = Counter()
        redacted = self.value(parsed, found, record=record, cut=cut)
        if not found:
            return raw
        counts.update(found)
        return jsonenc.dumps(redacted)


def _opaque_members(value: dict[str, Any], *, record: bool) -> frozenset[str]:
    """The keys of ``value`` whose string values are opaque by the provider's format."""
    kind = value.get("type")
    if not isinstance(kind, str):  # a "type" of any other JSON type names no provider format
        kind = None if kind is None else ""
    media = kind == "base64" or (kind is None and any(k in value for k in _MEDIA_KEYS))
    if record:
        if kind in OPAQUE_DATA_TYPES or media:
            return OPAQUE_KEYS | {"data"}
        return OPAQUE_KEYS
    return frozenset({"data"}) if media else frozenset()


def _inside_marker(text: str, position: int) -> bool:
    """Whether ``position`` of ``text`` falls inside a marker."""
    return any(m.start() <= position < m.end() for m in _MARKER.finditer(text))


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, overlapping ones merged."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _outside(
    spans: list[tuple[int, int, str]], guarded: list[tuple[int, int]]
) -> list[tuple[int, int, str]]:
    """The spans that overlap none of ``guarded`` (sorted, non-overlapping ``(start, end)``)."""
    starts = [start for start, _ in guarded]
    kept = []
    for start, end, name in spans:
        index = bisect.bisect_right(starts, end - 1) - 1  # last guarded span starting before end
        if index >= 0 and guarded[index][1] > start:
            continue
        kept.append((start, end, name))
    return kept


def _unnamed(pattern: str) -> str:
    """``pattern`` with its named groups made plain groups (names may repeat across patterns)."""
    return re.sub(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>", "(", pattern)


def _replace(text: str, spans: list[tuple[int, int, str]], counts: Counter[str]) -> str:
    """``text`` with each span replaced by its marker; overlapping spans merge into the first."""
    if not spans:
        return text
    spans.sort(key=lambda span: (span[0], -span[1]))
    out: list[str] = []
    position = 0
    for start, end, name in spans:
        if start < position:
            if end > position:  # overlaps the previous one: it grows
                position = end
            continue
        out.append(text[position:start])
        out.append(f"{MARKER_PREFIX}{name}]")
        counts[name] += 1
        position = end
    out.append(text[position:])
    return "".join(out)


class Pieces:
    """One text arriving in pieces (streamed increments): :meth:`add` takes the next piece and
    returns what may be shown of it. A last word (:func:`last_word`) that is not plain prose is
    held back until a blank ends it, and the text is redacted with everything before it, so a
    secret split across pieces is found whole and no more of it is shown than the few lower-case
    letters it may start with (``ghp``, ``sk``). Holds at most :data:`MAX_PIECES_TEXT` characters; not thread-safe (one per stream)."""

    def __init__(self) -> None:
        self.raw = ""  # the text so far (its last MAX_PIECES_TEXT characters at most)
        self.shown = ""  # the redacted text shown for it, up to the held-back run

    def add(self, piece: str) -> str:
        """The next ``piece`` of the text; returns what may be shown now (possibly "", when the
        piece only extends a held-back last word). Nothing raises."""
        redactor = current()
        if not redactor.enabled:
            return piece
        raw = self.raw + clean_text(piece)
        shown = redactor.text(raw[: _held_from(raw)], Counter())
        common = _common_prefix(shown, self.shown)
        out = shown[common:]
        if len(shown) >= len(self.shown) or common < len(shown):
            self.shown = shown
        self.raw = raw
        if len(raw) > MAX_PIECES_TEXT:  # keep the end: enough to find a secret across pieces
            self.raw = raw[-_OPEN_TAIL:]
            self.shown = redactor.text(self.raw[: _held_from(self.raw)], Counter())
        return out


def _held_from(raw: str) -> int:
    """Where the held-back part of a stream's text begins: its last word, unless that is a plain
    word (letters, a capital first at most, punctuation after: no secret starts so beyond a few
    public letters such as ``ghp`` or ``sk``) or too long."""
    word = last_word(raw)
    if word is None or _PLAIN_WORD.fullmatch(raw, word):
        return len(raw)
    return word


#: A word of prose, shown at once when it ends a stream's text so far.
_PLAIN_WORD: Final = re.compile(r"[A-Za-z]?[a-z]*[.,;!?'\")]*")


def _common_prefix(one: str, other: str) -> int:
    """The length of the longest common prefix of two strings."""
    for index, (a, b) in enumerate(zip(one, other, strict=False)):
        if a != b:
            return index
    return min(len(one), len(other))


class StoredPieces:
    """One text arriving in pieces that are each stored (the kept lines of a streamed answer,
    one increment per line): :meth:`add` returns the piece as it may be stored. A piece that may
    lie wholly inside a secret begun before it is replaced whole; the part of a secret begun
    before it that it ends, and a secret it may stop inside (``Redactor.cut_text``), become
    ``[REDACTED:partial]``; the rest is redacted as usual. Only pieces a secret touches change."""

    def __init__(self) -> None:
        self.tail = ""  # the end of the text so far, raw

    def add(self, piece: str) -> str:
        """The next ``piece`` of the text; returns it as it may be stored (the piece itself when
        no secret touches it, else with markers in place of what a secret covers). Nothing
        raises."""
        redactor = current()
        if not redactor.enabled:
            return piece
        piece = clean_text(piece)
        before, text = len(self.tail), self.tail + piece
        self.tail = text[-_OPEN_TAIL:]
        counts: Counter[str] = Counter()
        marker = f"{MARKER_PREFIX}{PARTIAL}]"
        begun = redactor.open_at(text)
        if begun is not None and begun < before:
            return marker  # the whole piece may belong to a secret that goes on
        end = redactor.crossing(text, before) if before else 0
        stored = marker + piece[end - before :] if end else piece
        return redactor.cut_text(stored, counts)


def replace_in_line(raw: str, old: str, new: str) -> str:
    """A JSON line with each string value equal to ``old`` replaced by ``new`` (compact JSON,
    ``jsonenc``); ``raw`` itself when it is not JSON or holds no such value."""
    if old == new:
        return raw
    try:
        parsed = jsonenc.loads(raw)
    except (ValueError, RecursionError):
        return raw
    found = [False]

    def walk(value: Any) -> Any:
        if isinstance(value, str) and value == old:
            found[0] = True
            return new
        if isinstance(value, dict):
            return {key: walk(member) for key, member in value.items()}
        if isinstance(value, list):
            return [walk(member) for member in value]
        return value

    replaced = walk(parsed)
    return jsonenc.dumps(replaced) if found[0] else raw


#: The most text :class:`Pieces` keeps of one stream.
MAX_PIECES_TEXT: Final = 16 * 1024


def settings_of(conf: Any) -> dict[str, Any]:
    """``MURMUR_CONVERSATIONS["REDACT"]`` over :data:`REDACT_DEFAULTS` (a non-dict counts as
    empty; ``checks.py`` reports it)."""
    return {**REDACT_DEFAULTS, **(conf if isinstance(conf, dict) else {})}


def build(conf: Any) -> Redactor:
    """Compile the redactor of a ``REDACT`` setting; ``ImproperlyConfigured`` naming the key
    when a pattern does not compile or a detector name is unknown (``checks.py`` says the same
    at start-up, as ``murmur_conversations.E020``)."""
    values = settings_of(conf)
    wanted = values["DETECTORS"]
    if wanted is not None:
        unknown = sorted(set(wanted) - set(SECRET_DETECTORS))
        if unknown:
            raise ImproperlyConfigured(f"{SETTING_NAME}['REDACT']['DETECTORS']: unknown {unknown}")
    for name, pattern in dict(values["PATTERNS"]).items():
        if not isinstance(name, str) or not DETECTOR_NAME.fullmatch(name):
            raise ImproperlyConfigured(f"{SETTING_NAME}['REDACT']['PATTERNS']: bad name {name!r}")
        compile_pattern(pattern, where=f"PATTERNS[{name!r}]")
    for pattern in values["ALLOW"]:
        compile_pattern(pattern, where="ALLOW")
    return Redactor(values)


def compile_pattern(pattern: Any, *, where: str) -> Any:
    """Compile a host pattern with RE2; ``ImproperlyConfigured`` when it is not a string, does
    not compile (RE2 has no backreferences or lookarounds) or matches the empty string."""
    if not isinstance(pattern, str) or not pattern:
        raise ImproperlyConfigured(
            f"{SETTING_NAME}['REDACT']['{where}'] must be a non-empty string"
        )
    try:
        compiled = _re2(pattern)
    except re2.error as error:
        reason = (
            error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else error
        )
        raise ImproperlyConfigured(
            f"{SETTING_NAME}['REDACT']['{where}'] is not an RE2 regular expression: {reason}"
        ) from None
    if compiled.fullmatch("") is not None:
        raise ImproperlyConfigured(f"{SETTING_NAME}['REDACT']['{where}'] matches the empty string")
    return compiled


_lock = threading.Lock()
#: Compiled redactors by the identity of the ``REDACT`` object they were built from (kept with
#: it, so an id is never reused): a host or the bench may swap the settings object at run time.
_compiled: dict[int, tuple[Any, Redactor]] = {}


def current() -> Redactor:
    """The redactor of the current ``MURMUR_CONVERSATIONS["REDACT"]``, compiled on first use of
    that setting object and again after ``override_settings`` changes it."""
    conf = app_settings.REDACT
    entry = _compiled.get(id(conf))
    if entry is not None and entry[0] is conf:
        return entry[1]
    with _lock:
        redactor = build(conf)
        if len(_compiled) >= 8:
            _compiled.clear()
        _compiled[id(conf)] = (conf, redactor)
    return redactor


def _forget(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING_NAME:
        _compiled.clear()


setting_changed.connect(_forget, dispatch_uid="murmur_conversations.redaction")


def _matchable(text: str) -> str:
    """``text`` as RE2 can read it: text that UTF-8 cannot encode (a lone surrogate, from a raw
    line or a caller's string) is repaired as stored text is (``jsonenc.clean_text``); the
    repaired copy is what a redaction returns, and only when it replaced something."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return clean_text(text)
    return text


def redact(
    value: T, *, source_line: bool = False, record: bool = False, cut: bool = False
) -> Redacted[T]:
    """Replace the secrets in ``value`` by ``[REDACTED:<detector>]`` markers (module docstring).

    ``value``: a string or a JSON value already cleaned by ``validation.clean_json`` (dict keys
    are strings; keys are redacted too). ``record=True``: a JSON value in a message format (a
    message, a display row's content, a tool's result): identities and opaque values are kept
    (``Redactor.value``); the default treats the whole value as content a person or a tool wrote
    (metadata, a pending ask). ``source_line=True``: ``value`` is one stored line of an imported
    log, redacted as a record (``Redactor.line``); with ``cut=True``, a line whose texts stop
    mid-way (``Redactor.cut_text``). Returns ``Redacted(value, counts)``; the value is ``value`` itself when
    nothing was found or redaction is off (``REDACT["ENABLED"]``). Raises ``ImproperlyConfigured``
    for a ``REDACT`` setting the system checks refuse.
    """
    redactor = current()
    if not redactor.enabled:
        return Redacted(value, {})
    counts: Counter[str] = Counter()
    if source_line:
        if not isinstance(value, str):
            raise TypeError("a source line is a string")
        result: Any = redactor.line(value, counts, cut=cut)
    elif isinstance(value, str):
        result = redactor.text(value, counts)
    else:
        result = redactor.value(value, counts, record=record)
    if not counts:
        return Redacted(value, {})
    return Redacted(result, dict(counts))


def fit(text: str, max_length: int, *, ellipsis: str = "") -> str:
    """A redacted short field (title, tool name) cut back to ``max_length`` characters, the last
    of them ``ellipsis`` when one is given; a marker cut in two is dropped whole."""
    if len(text) <= max_length:
        return text
    cut = text[: max_length - len(ellipsis)]
    opening = cut.rfind(MARKER_PREFIX)
    if opening >= 0 and "]" not in cut[opening:]:
        cut = cut[:opening]
    return cut + ellipsis


def redact_and_cut(text: str, max_length: int, *, ellipsis: str = "") -> Redacted[str]:
    """``text`` redacted, then cut to ``max_length`` characters (:func:`fit`): the one way to
    shorten text that may hold a secret (titles, excerpts), so a secret crossing the cut is
    replaced whole, never stored in part."""
    redacted, counts = redact(text)
    return Redacted(fit(redacted, max_length, ellipsis=ellipsis), counts)
