"""The three-way decision per call (upstream §6.2): keep, truncate the result, or drop the call."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .options import validate_threshold
from .pairing import ToolCall

Action = Literal["keep", "drop_result", "drop_call"]
Reason = Literal["pinned", "kept", "result_dropped", "call_dropped"]


@dataclass(frozen=True)
class CallDecision:
    id: str
    tool_use_id: str
    tool: str
    keep_call: float
    keep_result: float
    action: Action
    reason: Reason
    chars_freed: int = 0


def decide_call(call: ToolCall, answer: tuple[float, float] | None, keep_threshold: float) -> CallDecision:
    """Decide one call; a call without an answer (pinned, or never asked) is kept whole.

    The result dominates: a result worth keeping keeps its call. Equality counts as keep.
    """
    validate_threshold(keep_threshold)
    keep_call, keep_result = answer if answer is not None else (1.0, 1.0)
    for value in (keep_call, keep_result):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
            raise ValueError("Invalid keep probabilities")

    def made(action: Action, reason: Reason) -> CallDecision:
        return CallDecision(call.id, call.tool_use_id, call.tool, float(keep_call), float(keep_result), action, reason)

    if call.pinned:
        return CallDecision(call.id, call.tool_use_id, call.tool, 1.0, 1.0, "keep", "pinned")
    if keep_result >= keep_threshold:
        return made("keep", "kept")
    if keep_call >= keep_threshold:
        return made("drop_result", "result_dropped")
    return made("drop_call", "call_dropped")
