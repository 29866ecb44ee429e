"""What the judge was asked during one compaction, counted at the asker seam.

A failed run raises out of the pipeline with no stats, yet its requests, retries and time were
spent; watching the asker counts them whatever the outcome, so the decision-log row of a failed
Jev run carries real figures instead of zeros.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..state.asker import AskResult, JevAsker


@dataclass
class Tally:
    """What the judge was asked in one hook run, failed asks included."""

    requests: int = 0  # asks started, retries not included
    retries: int = 0  # extra attempts, of failed asks too (``JevError.retries``)
    failed: int = 0  # asks that raised
    input_tokens: int = 0
    output_tokens: int = 0

    def watch(self, asker: JevAsker) -> JevAsker:
        """The same judge, counted here."""
        return _Watched(asker, self)


class _Watched:
    def __init__(self, inner: JevAsker, tally: Tally) -> None:
        self._inner = inner
        self._tally = tally

    def __getattr__(self, name: str) -> Any:
        # Other capabilities of the judge (an in-process ``score_calls``) pass through unchanged.
        return getattr(self._inner, name)

    async def ask(self, state: Any, questions: Mapping[str, Any]) -> AskResult:
        tally = self._tally
        tally.requests += 1
        try:
            result = await self._inner.ask(state, questions)
        except Exception as exc:
            tally.failed += 1
            retries = getattr(exc, "retries", 0)
            tally.retries += retries if isinstance(retries, int) and retries > 0 else 0
            raise
        tally.retries += result.retries
        tally.input_tokens += result.usage.input_tokens
        tally.output_tokens += result.usage.output_tokens
        return result
