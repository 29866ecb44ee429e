"""The state and the questions checked against the Jev protocol's shapes before any is read."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import ValidationError

from ...state.protocol import QUESTIONS_ADAPTER, STATE_ADAPTER, first_problem


class JudgeInputError(ValueError):
    """The state or the questions are not in the shape the Jev protocol defines."""


def validate_state(state: Any) -> Mapping[str, Any]:
    """The compaction state as a mapping, checked against ``protocol.JevState``; a JSON string
    holding one is accepted too. The state is read as it came (the check's copy is let go)."""
    try:
        checked = STATE_ADAPTER.validate_python(state)
    except ValidationError as exc:
        raise JudgeInputError(first_problem(exc, "state")) from None
    return checked if isinstance(state, str) else state


def validate_questions(questions: Any) -> Mapping[str, Any]:
    """Named ``noul`` questions (``protocol.Questions``); anything else is an input error (the
    only type answered here)."""
    try:
        QUESTIONS_ADAPTER.validate_python(questions)
    except ValidationError as exc:
        raise JudgeInputError(first_problem(exc, "questions")) from None
    return questions
