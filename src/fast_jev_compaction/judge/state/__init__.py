"""Reading a Jev state: its entries, its calls (structured or one-line) and what became of them.

A state is what every judge gets (docs/ARCHITECTURE.md, "Jev state"): the goal, and history
entries whose calls are either structured (input JSON, maybe truncated, a result note and a
digest of the output) or one-line strings. This folder turns one into a :class:`StateView`:
every call with its kind, target, re-run keys and digest, and the texts around it, so features
can be computed from what the state carries and nothing else.

``validation`` checks the state and the questions first; ``view`` builds the view from the
``calls`` it finds, whose ``inputs`` are read back into fields; ``questions`` reads what each
question asks about.
"""

from __future__ import annotations

from .calls import PathRef, StateCall
from .questions import Question, parse_question
from .validation import JudgeInputError, validate_questions, validate_state
from .view import Entry, StateView, read_state

__all__ = [
    "Entry",
    "JudgeInputError",
    "PathRef",
    "Question",
    "StateCall",
    "StateView",
    "parse_question",
    "read_state",
    "validate_questions",
    "validate_state",
]
