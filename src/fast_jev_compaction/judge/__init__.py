"""Judges that answer the Jev questions without Jev: the embedded :class:`LocalJudge`.

What checks a state loads on first use (``judge/state/``): scoring in process, as the hook
does, never reads one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .local import LocalJudge

if TYPE_CHECKING:
    from .state import JudgeInputError, validate_questions, validate_state

__all__ = [
    "JudgeInputError",
    "LocalJudge",
    "validate_questions",
    "validate_state",
]


def __getattr__(name: str) -> Any:
    if name in ("JudgeInputError", "validate_questions", "validate_state"):
        from . import state

        return getattr(state, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
