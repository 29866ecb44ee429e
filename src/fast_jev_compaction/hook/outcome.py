"""What one hook run came to: the answer for the mod and what the decision log records of it.

Its own module so that the compaction and the entry, which make outcomes, and the record, which
writes them, all import it and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .tally import Tally

# The JSON document the mod reads: {"action": "replace" | "fallback" | "skip", ...}.
Answer = dict[str, Any]


@dataclass
class Outcome:
    """How a hook run ended: the answer sent and what the decision log records of it."""

    answer: Answer
    action: str
    reason: str
    result: Any = None
    goal: str = ""
    judge: str = ""
    category: str | None = None  # a fallback's FALLBACK_REASONS item
    tally: Tally | None = None  # what the judge was asked, failed runs included
    ms: int = 0  # the whole hook run, parse to answer
