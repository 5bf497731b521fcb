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

Replacement is in place: the rest of a text is kept, JSON keys and structure are kept, values of
the identity keys in :data:`IDENTITY_KEYS` are never touched (message and call ids, which are the
de-duplication identity, are computed and stored as given). Redaction is deterministic and
idempotent: markers already in a text are never matched again, and the passes repeat until nothing
is found, so ``redact(redact(x)) == redact(x)``. Counts per detector come back with the value;
the services add them to the conversation's ``RedactionCount`` rows in the same write.
"""

from __future__ import annotations

import bisect
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

T = TypeVar("T")

#: ``[REDACTED:<detector>]``; detector names are 1-40 lowercase letters, digits and hyphens.
MARKER_PREFIX: Final = "[REDACTED:"
DETECTOR_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_MARKER: Final = re.compile(r"\[REDACTED:[a-z0-9][a-z0-9-]{0,39}\]")
#: Values under these keys are identities (message, call and source ids, roles, block types):
#: never redacted, so de-duplication and the links between calls and results never change.
IDENTITY_KEYS: Final = frozenset(
    {"id", "role", "type", "tool_call_id", "tool_use_id", "call_id", "source_id"}
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

    def text(self, text: str, counts: Counter[str]) -> str:
        """``text`` with its secrets replaced; adds what it replaced to ``counts``."""
        if len(text) < _MIN_SECRET:
            return text
        for _ in range(_MAX_PASSES):
            if not self._candidate(text):
                return text
            redone = self._pass(text, counts)
            if redone == text:
                return text
            text = redone
        return text

    def _candidate(self, text: str) -> bool:
        if self.sniff is not None and self.sniff.search(text) is not None:
            return True
        return self.pii and _DIGIT.search(text) is not None

    def _pass(self, text: str, counts: Counter[str]) -> str:
        if self.pem:
            text = self._segments(text, self._pem, counts)
        for stage in self.stages:
            text = self._segments(text, stage.find, counts)
        if self.pii:
            text = self._segments(text, self._phones, counts)
        return text

    def _segments(
        self,
        text: str,
        find: Callable[[str], list[tuple[int, int, str]]],
        counts: Counter[str],
    ) -> str:
        """Apply ``find`` to ``text``, leaving markers alone: a span that overlaps a marker is
        dropped, so a marker is never matched again (the idempotence of docs/write-path.md)."""
        spans = find(text)
        if spans and MARKER_PREFIX in text:
            markers = [m.span() for m in _MARKER.finditer(text)]
            starts = [start for start, _ in markers]
            kept = []
            for start, end, name in spans:
                index = bisect.bisect_right(starts, end - 1) - 1  # last marker starting before end
                if index >= 0 and markers[index][1] > start:
                    continue
                kept.append((start, end, name))
            spans = kept
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

    # ------------------------------------------------------------------ JSON values

    def value(self, value: Any, counts: Counter[str], key: str | None = None) -> Any:
        """A JSON value with every string redacted (keys, numbers and structure kept); strings
        under :data:`IDENTITY_KEYS` are kept; a string under a keyword key (``password``,
        ``api_key``...) that looks secret (:func:`looks_secret`) is replaced whole."""
        if isinstance(value, str):
            if key in IDENTITY_KEYS:
                return value
            # JSON held as text (OpenAI function.arguments) is redacted as JSON: its escapes
            # would hide secrets from the text detectors.
            scan = self.line if value[:1] in ("{", "[") else self.text
            text = scan(value, counts)
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
            return {k: self.value(v, counts, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(item, counts, key) for item in value]
        return value

    def line(self, raw: str, counts: Counter[str]) -> str:
        """A stored source line: kept byte for byte unless it holds a secret; a JSON line that
        does is parsed, redacted as a JSON value and written back as compact JSON (``jsonenc``,
        ``ensure_ascii=False``), so a second redaction keeps it as it is."""
        probe = raw.replace('\\"', '"').replace("\\/", "/") if "\\" in raw else raw
        if len(raw) < _MIN_SECRET or not self._candidate(probe):
            return raw
        try:
            parsed = jsonenc.loads(raw)
        except (ValueError, RecursionError):
            return self.text(raw, counts)
        if not isinstance(parsed, dict | list):
            return self.text(raw, counts)
        found: Counter[str] = Counter()
        redacted = self.value(parsed, found)
        if not found:
            return raw
        counts.update(found)
        return jsonenc.dumps(redacted)


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


def redact(value: T, *, source_line: bool = False) -> Redacted[T]:
    """Replace the secrets in ``value`` by ``[REDACTED:<detector>]`` markers (module docstring).

    ``value``: a string or a JSON value already cleaned by ``validation.clean_json`` (dict keys
    are strings). ``source_line=True``: ``value`` is one stored line of an imported log
    (``Redactor.line``). Returns ``Redacted(value, counts)``; the value is ``value`` itself when
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
        result: Any = redactor.line(value, counts)
    elif isinstance(value, str):
        result = redactor.text(value, counts)
    else:
        result = redactor.value(value, counts)
    if not counts:
        return Redacted(value, {})
    return Redacted(result, dict(counts))


def fit(text: str, max_length: int) -> str:
    """A redacted short field (title, tool name) cut back to ``max_length`` characters when its
    markers made it longer; a marker cut in two is dropped whole."""
    if len(text) <= max_length:
        return text
    cut = text[:max_length]
    opening = cut.rfind(MARKER_PREFIX)
    if opening >= 0 and "]" not in cut[opening:]:
        cut = cut[:opening]
    return cut
