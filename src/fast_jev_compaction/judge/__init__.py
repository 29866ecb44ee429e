"""Judges that answer the Jev questions without Jev: the embedded :class:`LocalJudge`."""

from .local import CALL_WEIGHTS, RESULT_WEIGHTS, JudgeInputError, LocalJudge, validate_questions, validate_state

__all__ = [
    "CALL_WEIGHTS",
    "RESULT_WEIGHTS",
    "JudgeInputError",
    "LocalJudge",
    "validate_questions",
    "validate_state",
]
