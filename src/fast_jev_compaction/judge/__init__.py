"""Judges that answer the Jev questions without Jev: the embedded :class:`LocalJudge`."""

from .local import JudgeInputError, LocalJudge, validate_questions, validate_state

__all__ = [
    "JudgeInputError",
    "LocalJudge",
    "validate_questions",
    "validate_state",
]
