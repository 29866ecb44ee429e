"""Typed errors, and what the user is told to do about each.

::

    CompactionError               the caller falls back; the input is left as it was
    ├── InputError                exit 2: the input cannot be compacted as given
    │   ├── TranscriptError       not a transcript, bad JSON, not UTF-8 (names source:line)
    │   └── PairingError          duplicate tool ids, a result before its call
    ├── FittingError              exit 1: the state or the questions cannot fit the request budget
    └── JevError                  exit 1: a judge request failed (``retryable``, ``retries``)
        ├── JevRequestError       a non-2xx status
        ├── JevTransportError     no response: refused, reset, bad URL
        │   └── JevTimeoutError   the deadline expired
        ├── JevResponseError      2xx, but not an answer set
        └── JevConfigError        not configured: no key, a key over plain http

``str(error)`` says what went wrong; ``error.hint`` says what to do, once, with option names in
braces (``{api_key}``, ``{judge=local}``) that :func:`explain` renders for its reader: the CLI
flag (``--judge local``) or the plugin option (``the judge option set to local``).
"""

from __future__ import annotations

import re
from typing import Literal

Audience = Literal["cli", "plugin"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class CompactionError(Exception):
    """Base class: the caller falls back and leaves the conversation untouched."""

    hint: str = ""
    exit_code: int = EXIT_FAILED


class InputError(CompactionError, ValueError):
    """The input itself is wrong; trying again with the same input cannot help."""

    exit_code = EXIT_BAD_INPUT


class TranscriptError(InputError):
    """The input cannot be read as a conversation; the message names ``source:line``."""


class PairingError(InputError):
    """The tool_use/tool_result structure is inconsistent (duplicate ids, result before call)."""

    hint = "the file must be one session as Claude Code wrote it"


class FittingError(CompactionError):
    """The state or the questions cannot be made to fit the request budget."""

    hint = "raise {max_request_tokens}"


class JevError(CompactionError):
    """A judge request failed. ``retryable`` says whether trying again may help.

    ``retries`` is how many retries the asker spent before giving up, so the caller's stats can
    count the retries of failed requests too.
    """

    retryable: bool = False
    retries: int = 0
    hint = "try again, or use the embedded judge ({judge=local})"


class JevRequestError(JevError):
    """The endpoint answered with a non-2xx status; ``key_source`` names where the key came from."""

    def __init__(self, status: int, body: str = "", key_source: str = "") -> None:
        self.status = status
        self.body = body
        self.key_source = key_source
        super().__init__(f"Jev request failed ({status}): {body[:200]}".rstrip(": "))

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self.status == 429 or self.status >= 500

    @property
    def hint(self) -> str:  # type: ignore[override]
        status = self.status
        if status == 401:
            where = f" or {self.key_source}" if self.key_source else ""
            return f"check the API key ({{api_key}}{where})"
        if status == 402:
            return "the account has no credit left; top it up or use the embedded judge ({judge=local})"
        if status == 403:
            return "the key may not use this model or endpoint; check {model} and {base_url}"
        if status == 404:
            return "check the endpoint URL ({base_url})"
        if status == 429:
            return "rate limited after retries; lower {max_concurrent_requests} or try again later"
        if status >= 500:
            return "the Jev service failed after retries; try again later or use the embedded judge ({judge=local})"
        return ""


class JevTransportError(JevError):
    """The request never produced a response (connection refused, reset, timeout)."""

    hint = "check {base_url} and the network, or use the embedded judge ({judge=local})"

    def __init__(self, cause: BaseException | str, retryable: bool = True) -> None:
        self.cause = cause
        self._retryable = retryable
        super().__init__(f"Jev transport failed: {cause}")

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self._retryable


class JevTimeoutError(JevTransportError):
    """The deadline (covering the body read) expired."""

    hint = "raise {jev_timeout_seconds} or use the embedded judge ({judge=local})"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        JevError.__init__(self, f"Jev request timed out after {round(seconds * 1000)} ms")
        self.cause = "timeout"
        self._retryable = True


class JevResponseError(JevError):
    """The endpoint answered 2xx with a body that is not a valid answer set. Never retried."""

    hint = "check that {base_url} is a Jev endpoint, or use the embedded judge ({judge=local})"

    def __init__(self, message: str, names: list[str] | None = None) -> None:
        self.names = list(names or [])
        super().__init__(message)


class JevConfigError(JevError):
    """The client is not configured (no key, a key over plain http). Never retried."""

    def __init__(self, message: str, hint: str = "set {api_key}, or use the embedded judge ({judge=local})") -> None:
        self.hint = hint
        super().__init__(message)


_PLACEHOLDER = re.compile(r"\{(\w+)(?:=([^}]*))?\}")


def render_hint(hint: str, audience: Audience = "cli") -> str:
    """``{name}`` / ``{name=value}`` as the CLI flag or the plugin option (see ``options.OPTIONS``)."""
    from .options import OPTION

    def one(match: re.Match[str]) -> str:
        option = OPTION.get(match.group(1))
        value = match.group(2)
        if option is None:
            return match.group(0)
        if audience == "cli" and option.flag:
            return f"{option.flag} {value}" if value is not None else option.flag
        if option.key:
            where = f"the {option.key} option"
            return f"{where} set to {value}" if value is not None else where
        return option.flag or option.name

    return _PLACEHOLDER.sub(one, hint)


def explain(exc: BaseException, audience: Audience = "cli") -> str:
    """One line: what went wrong, then what to do about it when the error knows."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    hint = render_hint(getattr(exc, "hint", "") or "", audience)
    return f"{text}; {hint}" if hint else text


def exit_code(exc: BaseException) -> int:
    return int(getattr(exc, "exit_code", EXIT_FAILED))
