"""Values a name says are secret: ``NAME=value``, ``name: value``, ``--flag value``, and the ``-p``
of commands that take a password there.

Only the name and the operator are matched; the value is scanned (and consumed) only when the
name is secret, so no value is scanned twice."""

from __future__ import annotations

import re
from typing import Callable

from .mask import quoted_mask
from .names import is_secret_key

# Names worth a closer look contain one of these words; the lookahead is bounded and runs only at
# the start of a name, so a text full of ordinary ``name=value`` pairs is scanned in C alone.
SECRET_WORDS = "pass|pwd|token|secret|key|auth|credential|cookie"


def _maybe_secret(name_class: str) -> str:
    return rf"(?=[{name_class}]{{0,64}}?(?i:{SECRET_WORDS}))"


# NAME=value (shell, .env lines, query strings, --flag=value).
_ASSIGN_NAME = re.compile(r"(?<![A-Za-z0-9_.\-])-{0,2}" + _maybe_secret(r"A-Za-z0-9_.\-") + r"([A-Za-z_][A-Za-z0-9_.\-]*+)[ \t]*+=(?!=)[ \t]*+")
# Quotes may come escaped (\"): tool inputs often sit in the state as serialised JSON.
_ASSIGN_VALUE = re.compile(r"\\?\"[^\"\n]*+\"?|\\?'[^'\n]*+'?|[^\s&;,\"'`}\\]++")
# "name": value / name: value (JSON, YAML, HTTP headers).
_COLON_NAME = re.compile(
    r"(?<![A-Za-z0-9_\-])([\"']?)" + _maybe_secret(r"A-Za-z0-9_\-") + r"([A-Za-z_][A-Za-z0-9_\-]*+)\\?\1[ \t]*+:(?!//)[ \t]*+"
)
# One word, or two when the first is an auth scheme ("Authorization: Token abc").
_COLON_VALUE = re.compile(
    r"\\?\"[^\"\n]*+\"?|\\?'[^'\n]*+'?|(?:(?i:bearer|basic|token|digest|negotiate)[ \t]++)?[^\s,}\"'\\]++"
)
# A flag and its value (--password value, -token value).
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
        out.append(quoted_mask(value.group(0)))
        pos = value.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def mask_p_flags(text: str) -> str:
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


def mask_named_values(text: str) -> str:
    """Mask the values of secret ``NAME=value``, ``name: value`` and ``--flag value``, in that order."""
    text = _mask_named(text, _ASSIGN_NAME, 1, _ASSIGN_VALUE)
    text = _mask_named(text, _COLON_NAME, 2, _COLON_VALUE, _colon_secret)
    return _mask_named(text, _FLAG_NAME, 1, _FLAG_VALUE)
