"""How a failure is told: the short reason on the toast (the traceback goes to ``hook.log``)."""

from __future__ import annotations

import json

from ..conversation.messages import MessageError
from .deadline import DeadlineError
from .stdin import StdinError


def friendly_reason(exc: BaseException) -> str:
    """A short, actionable line for the toast; the traceback goes to hook.log."""
    from ..errors import CompactionError, explain  # local: only needed once something went wrong

    if isinstance(exc, DeadlineError):
        return str(exc)
    if isinstance(exc, EmptyInputError):
        return "the hook received no input"
    if isinstance(exc, StdinError):
        return f"the hook input could not be read: {exc}"
    if isinstance(exc, UnicodeDecodeError):
        return "the hook input is not UTF-8 text"
    if isinstance(exc, json.JSONDecodeError):
        return f"the hook input is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if isinstance(exc, MessageError):
        return f"the hook input is not a session.compact event ({exc})"
    if isinstance(exc, CompactionError):
        return explain(exc, "plugin")[:300]
    text = str(exc).strip() or type(exc).__name__
    return f"internal error ({type(exc).__name__}: {text})"[:300]


class EmptyInputError(Exception):
    """Stdin closed or went quiet without a single byte."""

    fallback_reason = "bad-input"
