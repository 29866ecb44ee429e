"""The category a failure falls back under, as the decision log counts it (``FALLBACK_REASONS``).

An exception may name its own category with a ``fallback_reason`` class attribute (the deadline
error does); otherwise its type decides. Anything unforeseen is "internal".
"""

from __future__ import annotations

import json

from ..audit.store import FALLBACK_REASONS
from .stdin import StdinError


def fallback_category(exc: BaseException) -> str:
    own = getattr(exc, "fallback_reason", None)
    if isinstance(own, str) and own in FALLBACK_REASONS:
        return own
    from ..errors import FittingError, JevError, PairingError  # local: only needed on failure
    from ..judge.state import JudgeInputError

    if isinstance(exc, (StdinError, UnicodeDecodeError, json.JSONDecodeError, PairingError)):
        return "bad-input"
    if isinstance(exc, (JevError, JudgeInputError)):
        return "judge-error"
    if isinstance(exc, FittingError):
        return "budget"
    if isinstance(exc, TimeoutError):
        return "deadline"
    return "internal"
