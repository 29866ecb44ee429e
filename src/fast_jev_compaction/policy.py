"""Which judged calls to cut: rank by value and cut the least valuable first, up to a target.

A single probability cliff flips a call between keep and drop on tiny score changes, and judges
answer on their own scales; a ranking does not care about the scale. The budget policy cuts the
calls with the lowest ``keep_result`` first until ``target_reduction`` of the candidate output
is freed (rules' drops count towards it), never cutting a call whose value reaches
``keep_floor`` or whose output is too small to be worth a marker. ``keep_threshold`` (the
threshold policy) stays for those who want the old cliff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .decisions import BUDGET, DROP, KEEP, TRUNCATE, Action, CallDecision, decide_call
from .pairing import ToolCall

# Outputs up to this size stay: a marker and the lost detail cost more than they free.
MIN_CUT_CHARS = 600


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
    cut_form: Callable[[ToolCall], Action],
    freed_by: Callable[[ToolCall, Action], int],
) -> list[CallDecision]:
    """Decide every scored call; ``cut_form`` says how a call is cut (truncate or drop)."""
    order = sorted(scored, key=lambda s: (s.keep_result, s.keep_call, -s.call.result_chars, s.call.id))
    freed = already_freed
    actions: dict[str, Action] = {}
    for item in order:
        call = item.call
        action: Action = KEEP
        if freed < target_chars and item.keep_result < keep_floor and call.result_chars > MIN_CUT_CHARS:
            action = cut_form(call)
            gained = freed_by(call, action)
            if gained <= 0 and action == TRUNCATE:
                action, gained = DROP, freed_by(call, DROP)
            if gained > 0:
                freed += gained
            else:
                action = KEEP
        actions[call.tool_use_id] = action
    return [
        CallDecision(s.call.id, s.call.tool_use_id, s.call.tool, s.keep_call, s.keep_result, actions[s.call.tool_use_id], BUDGET)
        for s in scored
    ]
