"""What the judge is told and asked (upstream §3.1, §5)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..conversation.pairing import ToolCall
from ..errors import FittingError
from ..textutil import format_number, js_json
from .tokens import QUOTES_TENTHS, estimate_tokens, from_tally, json_tally, tally

# Upstream's context asserted that every tool can be re-run, which biased the judge towards
# dropping; this one states what is and is not recoverable, and how.
STATE_CONTEXT = (
    "A coding assistant conversation is being compacted to free context. `history` is the "
    "conversation so far, oldest first; each tool output is shown as a short `result` note and "
    "long texts may be abridged. Each question asks whether one tool call, or the full output of "
    "that call, still needs to stay in the history verbatim. A call that is not kept leaves the "
    "history together with its output, and a one-line marker says that it ran; an output that is "
    "not kept is cut to its opening, closing and key lines. Either way the full output is saved "
    "to a file the assistant can read. The output of a command with side effects (a deploy, a "
    "push, a one-time code) cannot be produced again by re-running it."
)

# Room for "model" and the top-level key names of a request.
REQUEST_OVERHEAD_TOKENS = 20


def questions_for(call: ToolCall) -> dict[str, dict[str, Any]]:
    """The two ``noul`` questions of one candidate call, in wire order."""
    return {
        f"call_{call.id}": {
            "type": "noul",
            "instructions": (
                f"Tool call {call.id} ({call.tool}) should stay in the history: knowing this call "
                "was made, with its input, still matters for what the assistant does next"
            ),
        },
        f"result_{call.id}": {
            "type": "noul",
            "instructions": (
                f"The full output of tool call {call.id} ({call.tool}, {call.result_chars} chars) "
                "should stay in the history verbatim: the assistant still needs its contents and "
                "re-running the tool would not do"
            ),
        },
    }


def question_tokens(call: ToolCall) -> int:
    """``estimate_tokens(js_json(questions_for(call)))``, from tallies: the questions are a fixed
    text around the call's id (4 times), tool (twice) and output size, each set off by
    punctuation or a space, so their tallies add up (tokens.tally)."""
    tool_tenths, tool_others = json_tally(call.tool)
    id_tenths, id_others = json_tally(call.id)
    tokens = from_tally(
        _TEMPLATE[0] + 2 * (tool_tenths - QUOTES_TENTHS) + 4 * (id_tenths - QUOTES_TENTHS) + 5 * len(str(call.result_chars)),
        _TEMPLATE[1] + 2 * (tool_others - 2) + 4 * (id_others - 2),
    )
    return estimate_tokens(js_json(questions_for(call))) if tokens is None else tokens


# The questions' tally with an empty id and tool name and the digit of a zero-size output left out.
_BLANK = tally(js_json(questions_for(ToolCall("", "", "", {}, 0, 0, 0, False, False))))
_TEMPLATE = (_BLANK[0] - 5, _BLANK[1])


def batch_calls(
    candidates: Sequence[ToolCall],
    state_tokens: int,
    max_request_tokens: float,
    costs: Mapping[str, int] | None = None,
) -> list[list[ToolCall]]:
    """Greedy batches in call order, each fitting next to the state in one request.

    ``costs`` holds each call's :func:`question_tokens` by call id when the caller has them.
    """
    budget = max_request_tokens - state_tokens - REQUEST_OVERHEAD_TOKENS
    batches: list[list[ToolCall]] = []
    current: list[ToolCall] = []
    used = 0
    for call in candidates:
        cost = costs[call.id] if costs is not None else question_tokens(call)
        if current and used + cost > budget:
            batches.append(current)
            current, used = [], 0
        if not current and cost > budget:
            raise FittingError(
                f"state leaves no room for questions (~{state_tokens} of {format_number(max_request_tokens)} tokens)"
            )
        current.append(call)
        used += cost
    if current:
        batches.append(current)
    return batches


def batch_questions(batch: Sequence[ToolCall]) -> dict[str, dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {}
    for call in batch:
        merged.update(questions_for(call))
    return merged
