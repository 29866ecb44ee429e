"""The three outcomes of a call, one vocabulary everywhere: keep, truncate, drop.

- ``keep``: the call and its output stay verbatim.
- ``truncate``: the call stays; its output is cut to a digest (head, tail and key lines) plus a
  marker saying where the full output was saved.
- ``drop``: the call and its output leave the conversation; a one-line marker in the assistant
  message that held the call says what it was and where its output was saved.

A decision's ``reason`` names what settled it: ``pinned``, a deterministic rule (``rules.py``,
e.g. ``superseded-reread``), ``small`` (redundant, but smaller than its marker would be),
``threshold`` (a probability compared with ``keepThreshold``), ``budget`` (ranked against the
others to reach the reduction target), ``under-cut-size`` (an output the budget policy never
cuts, so a remote judge was not asked about it), ``under-target`` (a cut a rule would make, not
made because the pass had already freed what the window needs), ``input-archived`` (the
call's long input fields, a written file's body, a heredoc, a Task prompt, moved to the archive;
its output as the action says) or ``old-turn`` (the call's whole turn moved to the archive to
fit a window, ``turn_eviction.py``; its action is ``drop``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

from ..conversation.pairing import ToolCall
from ..options import validate_threshold

Action = Literal["keep", "truncate", "drop"]
KEEP: Final = "keep"
TRUNCATE: Final = "truncate"
DROP: Final = "drop"
ACTIONS: tuple[Action, ...] = (KEEP, TRUNCATE, DROP)

# Spellings of the first releases (and of the upstream system), still found in old decision logs.
LEGACY_ACTIONS: Final = {
    "drop_result": TRUNCATE, "result_dropped": TRUNCATE, "drop_call": DROP, "call_dropped": DROP, "kept": KEEP,
}

PINNED: Final = "pinned"
# A call a rule found redundant but whose output is smaller than the marker that would replace it.
SMALL: Final = "small"
THRESHOLD: Final = "threshold"
UNDER_CUT: Final = "under-cut-size"
BUDGET: Final = "budget"
UNDER_TARGET: Final = "under-target"
INPUT_ARCHIVED: Final = "input-archived"
OLD_TURN: Final = "old-turn"


def action_name(value: str) -> str:
    """The current spelling of an action read from anywhere (old logs included)."""
    return LEGACY_ACTIONS.get(value, value)


@dataclass(frozen=True, slots=True)
class CallDecision:
    """What becomes of one tool call, with the judge's probabilities and why."""

    id: str
    tool_use_id: str
    tool: str
    keep_call: float
    keep_result: float
    action: Action
    reason: str
    chars_freed: int = 0
    # Where the full output was saved when the call was cut (None when kept, or not saved).
    archive_path: str | None = None
    # Where its input went when it was moved (``input-archived``: the file its largest moved
    # field's marker names), whether or not its output was cut too.
    input_archive_path: str | None = None


def valid_probability(value: object) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and 0 <= value <= 1
    )


def decide_call(call: ToolCall, answer: tuple[float, float] | None, keep_threshold: float) -> CallDecision:
    """The threshold policy for one call; a call without an answer is kept whole.

    The output dominates: an output worth keeping keeps its call. Equality counts as keep.
    """
    validate_threshold(keep_threshold)
    keep_call, keep_result = answer if answer is not None else (1.0, 1.0)
    if not (valid_probability(keep_call) and valid_probability(keep_result)):
        raise ValueError("Invalid keep probabilities")

    def made(action: Action) -> CallDecision:
        return CallDecision(
            call.id, call.tool_use_id, call.tool, float(keep_call), float(keep_result), action, THRESHOLD
        )

    if call.pinned:
        return CallDecision(call.id, call.tool_use_id, call.tool, 1.0, 1.0, KEEP, PINNED)
    if keep_result >= keep_threshold:
        return made(KEEP)
    if keep_call >= keep_threshold:
        return made(TRUNCATE)
    return made(DROP)
