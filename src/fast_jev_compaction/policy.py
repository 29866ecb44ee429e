"""Which judged calls to cut: the outputs that free the most, least valuable first, up to a target.

A single probability cliff flips a call between keep and drop on tiny score changes, and judges
answer on their own scales. The budget policy truncates outputs longer than ``MIN_CUT_CHARS``,
those the judge values least first, until ``target_reduction`` of the judged outputs' characters
is freed (rules' drops count towards it), never one valued at ``keep_floor`` or more. It only
truncates: a judged call is never dropped whole (only a rule that finds it redundant drops a
call), and every cut output is archived whole.

The numbers come from ``fast-jev eval`` on the corpus (fire points at 40/60/80 % of 60
sessions, 255 outputs reused after the fire point; removal counted over unpinned outputs):

====================  ========  =====================
cut outputs over       removed   reused outputs gone
====================  ========  =====================
2,000 chars            67 %      18 %
4,000 chars            61 %      12 %
6,000 chars            54 %      5.1 %
8,000 chars            51 %      4.3 %
====================  ========  =====================

Ranking by the fitted judge instead of by size (cutting low ``keep_result`` outputs first, or
protecting high ones with a floor) lost more at every removal level: a reused output is most
often a large one, so the judge's high scores sit on exactly the outputs that free the most.
The floor is therefore off by default (1.0) and the size does the work. ``keep_threshold`` (the
threshold policy) stays for those who want the old cliff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .decisions import BUDGET, KEEP, TRUNCATE, Action, CallDecision, decide_call
from .pairing import ToolCall

# Outputs up to this size stay whole under the budget policy (see the table above).
MIN_CUT_CHARS = 6000


def could_cut(call: ToolCall) -> bool:
    """Whether the budget policy could cut this output, whatever the judge answers: a judged
    call is never dropped and an output up to MIN_CUT_CHARS stays whole, so a remote judge is
    asked only about calls for which this holds."""
    return call.result_chars > MIN_CUT_CHARS


@dataclass(frozen=True)
class Scored:
    call: ToolCall
    keep_call: float
    keep_result: float


def threshold_decisions(scored: Sequence[Scored], keep_threshold: float) -> list[CallDecision]:
    return [decide_call(s.call, (s.keep_call, s.keep_result), keep_threshold) for s in scored]


def budget_decisions(
    scored: Sequence[Scored],
    *,
    target_chars: float,
    already_freed: float,
    keep_floor: float,
    freed_by: Callable[[ToolCall, Action], int],
) -> list[CallDecision]:
    """Decide every scored call: truncate the least valuable until the target is met."""
    order = sorted(scored, key=lambda s: (s.keep_result, s.keep_call, -s.call.result_chars, s.call.id))
    freed = already_freed
    actions: dict[str, Action] = {}
    for item in order:
        call = item.call
        action: Action = KEEP
        if freed < target_chars and item.keep_result < keep_floor and could_cut(call):
            gained = freed_by(call, TRUNCATE)
            if gained > 0:
                action = TRUNCATE
                freed += gained
        actions[call.tool_use_id] = action
    return [
        CallDecision(s.call.id, s.call.tool_use_id, s.call.tool, s.keep_call, s.keep_result, actions[s.call.tool_use_id], BUDGET)
        for s in scored
    ]
