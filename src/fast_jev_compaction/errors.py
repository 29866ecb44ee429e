"""Typed errors. Everything the library raises on purpose derives from ``CompactionError``."""

from __future__ import annotations


class CompactionError(Exception):
    """Base class: the caller falls back and leaves the conversation untouched."""


class PairingError(CompactionError, ValueError):
    """The tool_use/tool_result structure is inconsistent (duplicate ids, result before call)."""


class FittingError(CompactionError):
    """The state or the questions cannot be made to fit the request budget."""


class JevError(CompactionError):
    """A judge request failed. ``retryable`` says whether trying again may help.

    ``retries`` is how many retries the asker spent before giving up, so the caller's stats can
    count the retries of failed requests too.
    """

    retryable: bool = False
    retries: int = 0


class JevRequestError(JevError):
    """The endpoint answered with a non-2xx status."""

    def __init__(self, status: int, body: str = "", hint: str = "") -> None:
        self.status = status
        self.body = body
        message = f"Jev request failed ({status}): {body[:200]}"
        if hint:
            message = f"{message} ({hint})"
        super().__init__(message)

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self.status == 429 or self.status >= 500


class JevTransportError(JevError):
    """The request never produced a response (connection refused, reset, timeout)."""

    def __init__(self, cause: BaseException | str, retryable: bool = True) -> None:
        self.cause = cause
        self._retryable = retryable
        super().__init__(f"Jev transport failed: {cause}")

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self._retryable


class JevTimeoutError(JevTransportError):
    """The deadline (covering the body read) expired."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        JevError.__init__(self, f"Jev request timed out after {round(seconds * 1000)} ms")
        self.cause = "timeout"
        self._retryable = True


class JevResponseError(JevError):
    """The endpoint answered 2xx with a body that is not a valid answer set. Never retried."""

    def __init__(self, message: str, names: list[str] | None = None) -> None:
        self.names = list(names or [])
        super().__init__(message)


class JevConfigError(JevError):
    """The client is not configured (no key, bad URL). Never retried."""
