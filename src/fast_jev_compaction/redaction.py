"""The one redactor: credentials are masked before any text leaves the process.

``redact_text(str) -> str`` masks secret-looking substrings of free text; ``redact_json(value)``
walks a JSON-like value, masks the values of secret-named keys and redacts every string, so a
JSON document stays valid. The Jev request body, the decision log and ``hook.log`` all go through
here. Archives keep the user's own bytes and never do.

What is masked: AWS access keys and secret keys, GitHub tokens (``ghp_``, ``gho_``, ``ghs_``,
``ghu_``, ``ghr_``, ``github_pat_``), Slack tokens (``xox?-``), OpenAI/Anthropic-style keys
(``sk-…``), Stripe (``sk_live_``, ``rk_live_``, ``…_test_``), Google (``AIza…``), GitLab
(``glpat-``), Hugging Face (``hf_``) and SendGrid (``SG.``) keys, JWTs, bearer/basic credentials, PEM private-key blocks (one cut before its END or
after its BEGIN loses everything on its cut side), ``KEY=value`` /
``key: value`` / ``--key value`` where the name says secret (``--pass`` too), URL userinfo
passwords, ``-u user:password`` (curl), and the ``-p`` value of ``mysql``, ``mariadb``,
``sshpass`` and any ``login`` command (``docker login -p``).

Linear time by construction (the old patterns were quadratic on long identifier runs because
every position of the run started a fresh scan to its end):

- every pattern opens with a negative lookbehind on the character class its first run scans,
  so inside such a run only its first position can start a match;
- every unbounded repeat is possessive (``*+``, ``++``) and stops at a character its successor
  needs, so a failed attempt never backtracks into it;
- ``name = value`` forms only match the name and the operator; the value is scanned (and
  consumed) only when the name is secret, so no value is scanned twice.

Stdlib only: the hook imports this on its hot path.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Callable

MASK = "***"
PEM_MASK = "[private key redacted]"

# Name segments that mark a secret on their own ("github_token", "DB_PASSWORD", "SIGNING_KEY").
_SECRET_SEGMENTS = frozenset(
    {
        "password",
        "pass",
        "passwd",
        "passphrase",
        "pwd",
        "token",
        "secret",
        "key",
        "apikey",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cookie",
        "privatekey",
    }
)
# "key" after one of these names a lookup key, not a credential ("sort_key", "primary_key").
_PLAIN_KEY_PREFIXES = frozenset(
    {"primary", "foreign", "sort", "cache", "partition", "hash", "dict", "map", "row", "hot", "unique", "lookup", "group"}
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def is_secret_key(name: str) -> bool:
    """True when a key, flag or variable name says its value is a credential.

    Whole segments, not substrings: ``max_tokens``, ``passthrough`` and ``sort_key`` stay visible.
    """
    segments = [s for s in _NON_ALNUM.split(_CAMEL.sub("_", name[:256]).lower()) if s]
    if not segments:
        return False
    if "".join(segments) in _SECRET_SEGMENTS:
        return True
    if any(s in _SECRET_SEGMENTS and s != "key" for s in segments):
        return True
    # "key" names a credential as the last word ("SIGNING_KEY", "api_key"), unless a lookup key
    # ("sort_key"); "KeyError" or "key_file" are not secrets.
    return segments[-1] == "key" and (len(segments) == 1 or segments[-2] not in _PLAIN_KEY_PREFIXES)


def _entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(value: str, min_length: int = 20, min_entropy: float = 3.5) -> bool:
    """Long, upper and lower case and digits, high per-character entropy: a key, not a word,
    a path or a (single-case) hex hash."""
    if len(value) < min_length:
        return False
    if not (any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value)):
        return False
    return _entropy(value) >= min_entropy


def _quoted_mask(value: str) -> str:
    # Keep the quotes so the surrounding command or document still reads as one.
    if value[:1] in ("'", '"'):
        return f"{value[0]}{MASK}{value[0] if value[-1:] == value[0] and len(value) > 1 else ''}"
    return MASK


# --------------------------------------------------------------------------- PEM blocks

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")


def _mask_pem(text: str) -> str:
    if "PRIVATE KEY-----" not in text:
        return text
    out: list[str] = []
    pos = 0
    # A block cut before its BEGIN (the closing lines of an output, a digest's end): everything
    # before its END may be key material.
    first_end = _PEM_END.search(text)
    if first_end is not None:
        first_begin = _PEM_BEGIN.search(text, 0, first_end.start())
        if first_begin is None:
            out.append(PEM_MASK)
            pos = first_end.end()
    while (begin := _PEM_BEGIN.search(text, pos)) is not None:
        out.append(text[pos : begin.start()])
        end = _PEM_END.search(text, begin.end())
        out.append(PEM_MASK)
        if end is None:  # an unterminated block: everything after BEGIN is key material
            return "".join(out)
        pos = end.end()
    out.append(text[pos:])
    return "".join(out)


# --------------------------------------------------------------------------- value patterns

_URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*+://[^\s/?#@:]++:)[^\s/?#@]++@")
_AUTH_SCHEME = re.compile(r"(?<![A-Za-z0-9_])((?i:bearer|basic)[ \t]++)([A-Za-z0-9._~+/\-]++=*+)")
_AWS_PREFIXES = ("AKIA", "ASIA", "AIDA", "AROA", "AGPA", "ANPA", "ANVA", "AIPA", "ABIA", "ACCA")
_AWS_ACCESS_KEY = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(_AWS_PREFIXES) + r")[0-9A-Z]{16}(?![A-Za-z0-9])")
_AWS_SECRET_KEY = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_GITHUB_TOKEN = re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{20}|github_pat_[A-Za-z0-9_]{20})[A-Za-z0-9_]*+")
_SLACK_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])xox[abposr]-[A-Za-z0-9\-]{10}[A-Za-z0-9\-]*+")
_SK_KEY = re.compile(r"(?<![A-Za-z0-9_\-])sk-[A-Za-z0-9_\-]{16}[A-Za-z0-9_\-]*+")
# Vendor keys known by their prefix alone.
_VENDOR_PREFIXES = ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "AIza", "glpat-", "hf_", "SG.")
_VENDOR_KEY = re.compile(
    r"(?<![A-Za-z0-9_\-.])(?:[sr]k_(?:live|test)_[A-Za-z0-9]{8}|AIza[A-Za-z0-9_\-]{30}|glpat-[A-Za-z0-9_\-]{16}"
    r"|hf_[A-Za-z0-9]{24}|SG\.[A-Za-z0-9_\-]{16,}+\.[A-Za-z0-9_\-]{16})[A-Za-z0-9_\-.]*+"
)
# curl's -u/--user (and -U/--proxy-user) user:password, quoted (to the quote) or not (to a space);
# the user stays.
_USER_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9_\-])((?:-[uU]|--user|--proxy-user)(?:[ \t]++|=)?+)"
    r"(?:(\\?[\"'])([^\s:\"'\\]++:)[^\"'\\\n]*+|([^\s:\"'\\]++:)[^\s\"'\\]++)"
)
_JWT = re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]++\.eyJ[A-Za-z0-9_\-]++\.[A-Za-z0-9_\-]*+")


def _mask_auth_scheme(match: re.Match[str]) -> str:
    credential = match.group(2)
    # "Basic authentication" is prose; a credential has digits, symbols or inner capitals.
    looks_like_one = len(credential) >= 8 and (
        any(not c.isalpha() for c in credential) or any(c.isupper() for c in credential[1:])
    )
    return f"{match.group(1)}{MASK}" if looks_like_one else match.group(0)


def _mask_aws_secret(match: re.Match[str]) -> str:
    return MASK if _looks_random(match.group(0), 40, 4.0) else match.group(0)


# --------------------------------------------------------------------------- named values

# Names worth a closer look contain one of these words; the lookahead is bounded and runs only at
# the start of a name, so a text full of ordinary ``name=value`` pairs is scanned in C alone.
_SECRET_WORDS = "pass|pwd|token|secret|key|auth|credential|cookie"


def _maybe_secret(name_class: str) -> str:
    return rf"(?=[{name_class}]{{0,64}}?(?i:{_SECRET_WORDS}))"


# NAME=value (shell, .env lines, query strings, --flag=value).
_ASSIGN_NAME = re.compile(r"(?<![A-Za-z0-9_.\-])-{0,2}" + _maybe_secret(r"A-Za-z0-9_.\-") + r"([A-Za-z_][A-Za-z0-9_.\-]*+)[ \t]*+=(?!=)[ \t]*+")
# Quotes may come escaped (\"): tool inputs often sit in the state as serialised JSON.
_ASSIGN_VALUE = re.compile(r"\\?\"[^\"\n]*+\"?|\\?'[^'\n]*+'?|[^\s&;,\"'`}\\]++")
# =value that looks like a generated key, whatever the name ("SIGNING=q8Zr4TbX2mWn7KpL9vYc").
_ASSIGNED_RANDOM = re.compile(r"(?<==)([\"']?+)([A-Za-z0-9+/_\-.~]{20,}+)")
# "name": value / name: value (JSON, YAML, HTTP headers).
_COLON_NAME = re.compile(
    r"(?<![A-Za-z0-9_\-])([\"']?)" + _maybe_secret(r"A-Za-z0-9_\-") + r"([A-Za-z_][A-Za-z0-9_\-]*+)\\?\1[ \t]*+:(?!//)[ \t]*+"
)
# One word, or two when the first is an auth scheme ("Authorization: Token abc").
_COLON_VALUE = re.compile(
    r"\\?\"[^\"\n]*+\"?|\\?'[^'\n]*+'?|(?:(?i:bearer|basic|token|digest|negotiate)[ \t]++)?[^\s,}\"'\\]++"
)
# --password value
_FLAG_NAME = re.compile(r"(?<![A-Za-z0-9_\-])--?" + _maybe_secret(r"A-Za-z0-9\-") + r"([A-Za-z][A-Za-z0-9\-]*+)[ \t]++")
_FLAG_VALUE = re.compile(r"\"[^\"\n]*+\"?|'[^'\n]*+'?|[^\s\-*][^\s]*+")


def _colon_secret(name: str) -> bool:
    # "key: value" and "pass: 12" are as often prose ("no Jev key: set one", a test tally) as a
    # credential; "api_key:" is not.
    return name.lower() not in ("key", "pass") and is_secret_key(name)


# Commands whose -p flag takes a password: mysql -pSECRET, sshpass -p SECRET, docker login -p SECRET.
_P_COMMAND = re.compile(r"(?<![A-Za-z0-9_\-])(?:mysql[a-z]*+|mariadb[a-z\-]*+|sshpass|login)(?![A-Za-z0-9_\-])")
# The command's arguments before its -p, within one command; possessive, so the scan can resume
# at its end when no -p follows.
_P_ARGUMENTS = re.compile(r"(?:[ \t]++(?!-p)[^\s|;&]++)*+")
_P_FLAG = re.compile(r"[ \t]++-p[ \t]*+")


def _mask_found(text: str, find: Callable[[str, int], tuple[int, re.Match[str] | None] | None]) -> str:
    """Mask every value ``find`` finds. ``find(text, pos)`` searches from ``pos`` and gives where
    its read ended and the value to mask, which starts there (None: nothing to mask this time, the
    scan resumes at that end); None once nothing is left."""
    out: list[str] = []
    pos = 0
    while (found := find(text, pos)) is not None:
        end, value = found
        out.append(text[pos:end])
        if value is None:
            pos = end
            continue
        out.append(_quoted_mask(value.group(0)))
        pos = value.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def _mask_p_flags(text: str) -> str:
    """Mask the value of ``-p`` after a command that takes a password there."""

    def find(text: str, pos: int) -> tuple[int, re.Match[str] | None] | None:
        command = _P_COMMAND.search(text, pos)
        if command is None:
            return None
        arguments = _P_ARGUMENTS.match(text, command.end())
        flag = _P_FLAG.match(text, arguments.end()) if arguments is not None else None
        value = _ASSIGN_VALUE.match(text, flag.end()) if flag is not None else None
        if flag is None or value is None:
            # No later command in the same arguments can reach a -p this one did not.
            return (arguments.end() if arguments is not None else command.end()), None
        return flag.end(), value

    return _mask_found(text, find)


def _mask_named(
    text: str,
    name_pattern: re.Pattern[str],
    name_group: int,
    value_pattern: re.Pattern[str],
    secret: Callable[[str], bool] = is_secret_key,
) -> str:
    """Mask the value after every secret name; scanning resumes right after what was read."""

    def find(text: str, pos: int) -> tuple[int, re.Match[str] | None] | None:
        match = name_pattern.search(text, pos)
        if match is None:
            return None
        end = match.end()
        return end, value_pattern.match(text, end) if secret(match.group(name_group)) else None

    return _mask_found(text, find)


def _mask_user_password(match: re.Match[str]) -> str:
    flag, quote, quoted_user, user = match.groups()
    return f"{flag}{quote}{quoted_user}{MASK}" if quote else f"{flag}{user}{MASK}"


def _mask_assigned_random(match: re.Match[str]) -> str:
    return f"{match.group(1)}{MASK}" if _looks_random(match.group(2)) else match.group(0)


# Every match of a secret name or an auth scheme holds one of these words (the same case-insensitive
# alternatives as the patterns'), so a text without any skips those patterns.
_HINT = re.compile(rf"(?i:{_SECRET_WORDS}|bearer|basic)")


def _hinted(text: str) -> bool:
    return _HINT.search(text) is not None


def _holds(*literals: str) -> Callable[[str], bool]:
    return lambda text: any(literal in text for literal in literals)


def _always(text: str) -> bool:
    return True


# Each pattern beside a test that every text it can match passes (each match holds one of the
# literals): a text that fails it cannot change, and is not searched.
_SUBSTITUTIONS: tuple[tuple[Callable[[str], bool], re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_holds("://"), _URL_USERINFO, rf"\1{MASK}@"),
    (_hinted, _AUTH_SCHEME, _mask_auth_scheme),
    (_holds(*_AWS_PREFIXES), _AWS_ACCESS_KEY, MASK),
    (_always, _AWS_SECRET_KEY, _mask_aws_secret),
    (_holds("gh", "github_pat_"), _GITHUB_TOKEN, MASK),
    (_holds("xox"), _SLACK_TOKEN, MASK),
    (_holds("sk-"), _SK_KEY, f"sk-{MASK}"),
    (_holds(*_VENDOR_PREFIXES), _VENDOR_KEY, MASK),
    (_holds("-u", "-U"), _USER_PASSWORD, _mask_user_password),
    (_holds("eyJ"), _JWT, MASK),
    (_holds("="), _ASSIGNED_RANDOM, _mask_assigned_random),
)


def redact_text(text: str) -> str:
    """Mask secret-looking substrings of free text. Idempotent; linear in ``len(text)``."""
    text = _mask_pem(text)
    for may_match, pattern, replacement in _SUBSTITUTIONS:
        if may_match(text):
            text = pattern.sub(replacement, text)
    if "-p" in text:
        text = _mask_p_flags(text)
    if not _hinted(text):
        return text
    text = _mask_named(text, _ASSIGN_NAME, 1, _ASSIGN_VALUE)
    text = _mask_named(text, _COLON_NAME, 2, _COLON_VALUE, _colon_secret)
    return _mask_named(text, _FLAG_NAME, 1, _FLAG_VALUE)


def redact_json(value: Any) -> Any:
    """A copy of a JSON-like value: secret-named keys' values masked, every string redacted."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_secret_key(key) and item not in (None, "", [], {}):
                out[key] = MASK
            else:
                out[key] = redact_json(item)
        return out
    if isinstance(value, (list, tuple)):
        return [redact_json(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
