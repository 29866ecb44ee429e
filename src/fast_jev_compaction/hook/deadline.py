"""The whole-compaction deadline, derived from the mod's ``timeoutSeconds``.

The mod kills the hook process at ``timeoutSeconds``; a killed hook leaves no answer, no
decision-log row and no log line. So the hook answers by ``timeoutSeconds`` minus a margin
(``max(1 s, 10 %)``, at most half of it: process start-up and the mod's own work), and stops the compaction earlier
still, keeping a reserve for writing the row, the log line and the answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

MIN_MARGIN_S = 1.0
MARGIN_SHARE = 0.10
# Kept for the row, the log line and the answer once the compaction has stopped.
MIN_RESERVE_S = 0.5
RESERVE_SHARE = 0.20
MAX_RESERVE_S = 5.0
# The share of the reserve the main path has to claim the row before the last resort does.
MAIN_PATH_SHARE = 0.2


class DeadlineError(Exception):
    """The compaction would have run past the deadline; the hook falls back in time."""

    fallback_reason = "deadline"  # the decision log's category (hook/category.py)

    def __init__(self, timeout_s: float, spent_s: float) -> None:
        self.timeout_s = timeout_s
        super().__init__(
            f"out of time after {spent_s:.1f} s (timeoutSeconds {timeout_s:g}); "
            "a slow judge or a very long session needs a larger timeoutSeconds"
        )


@dataclass(frozen=True)
class Deadline:
    """The hook run's time: ``timeout_s`` from ``started`` (monotonic), as the mod counts it."""

    timeout_s: float
    started: float = field(default_factory=time.monotonic)

    @property
    def answer_at(self) -> float:
        """The monotonic instant by which the answer must be on stdout."""
        margin = min(max(MIN_MARGIN_S, MARGIN_SHARE * self.timeout_s), self.timeout_s / 2)
        return self.started + self.timeout_s - margin

    @property
    def compaction_at(self) -> float:
        """The monotonic instant by which the compaction must have stopped."""
        return self.answer_at - self.reserve_s

    @property
    def reserve_s(self) -> float:
        return min(MAX_RESERVE_S, max(MIN_RESERVE_S, RESERVE_SHARE * self.timeout_s))

    @property
    def last_resort_at(self) -> float:
        """When a compaction that never yielded is given up on; most of the reserve is left to
        write its row (the process competes with the stuck work for the GIL)."""
        return self.compaction_at + MAIN_PATH_SHARE * self.reserve_s

    def compaction_budget_s(self) -> float:
        return max(0.0, self.compaction_at - time.monotonic())

    def error(self) -> DeadlineError:
        return DeadlineError(self.timeout_s, time.monotonic() - self.started)
