"""The pluggable judge seam: anything that answers named ``noul`` questions about one state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, runtime_checkable


@dataclass
class Usage:
    """Tokens the judge reports having read and written."""

    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, other: "Usage") -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens


@dataclass
class AskResult:
    """One answered request.

    ``answers`` is the raw ``answers`` object of the Jev wire format (name -> ``{"type": "noul",
    "noul": p}``); the core validates it, so every asker is held to the same rules.
    ``retries`` counts the extra attempts this request needed.
    """

    answers: Mapping[str, Any]
    usage: Usage = field(default_factory=Usage)
    retries: int = 0


@runtime_checkable
class JevAsker(Protocol):
    """Answers every question in ``questions`` against ``state``.

    ``state`` is the JSON-ready compaction state; ``questions`` maps a name to
    ``{"type": "noul", "instructions": ...}``.
    """

    async def ask(self, state: Any, questions: Mapping[str, Any]) -> AskResult: ...


def in_process(asker: Any) -> bool:
    """Whether ``asker`` scores calls itself, in this process, without requests."""
    return callable(getattr(asker, "score_calls", None))


def answers_at_once(asker: Any) -> bool:
    """Whether ``asker`` answers without waiting on anything (no I/O, timer or other task): it
    scores calls in process (``score_calls``) or says so with ``answers_at_once = True``.

    A compaction with such an asker is stepped through without an event loop
    (``compaction.run_sync``), which would cost more than a small compaction itself; one that
    waits after all stops with an error rather than hang.
    """
    return in_process(asker) or getattr(asker, "answers_at_once", False) is True
