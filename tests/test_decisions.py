"""The three-way decision (upstream §6.2, §8.1 "decisions", regressions 00 and 02)."""

from __future__ import annotations

import math

import pytest

from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.decide.decisions import decide_call
from scripted_asker import ten_messages


def calls():
    candidate, _, pinned = pair_tool_calls(ten_messages(), 3).calls
    assert not candidate.pinned and pinned.pinned
    return candidate, pinned


@pytest.mark.parametrize(
    "keep_call, keep_result, action, reason",
    [
        (0, 0, "drop", "threshold"),
        (1, 0, "truncate", "threshold"),
        (0, 1, "keep", "threshold"),  # a result worth keeping keeps its call
        (0.5, 0, "truncate", "threshold"),  # equality keeps
        (0, 0.5, "keep", "threshold"),
        (0.49, 0.49, "drop", "threshold"),
        (1, 1, "keep", "threshold"),
    ],
)
def test_matrix_at_half(keep_call, keep_result, action, reason):
    candidate, _ = calls()
    decision = decide_call(candidate, (keep_call, keep_result), 0.5)
    assert (decision.action, decision.reason) == (action, reason)
    assert (decision.keep_call, decision.keep_result) == (keep_call, keep_result)
    assert (decision.id, decision.tool, decision.tool_use_id) == ("t1", "Read", "toolu_a")


def test_pinned_is_kept_whatever_the_answer():
    _, pinned = calls()
    for answer in ((0, 0), None):
        decision = decide_call(pinned, answer, 0.5)
        assert (decision.keep_call, decision.keep_result, decision.action, decision.reason) == (1, 1, "keep", "pinned")


def test_no_answer_means_keep_whole():
    candidate, _ = calls()
    decision = decide_call(candidate, None, 0.5)
    assert (decision.keep_call, decision.keep_result, decision.action, decision.reason) == (1, 1, "keep", "threshold")


def test_raising_the_threshold_deletes_more():
    candidate, _ = calls()
    answer = (0.6, 0.6)
    assert decide_call(candidate, answer, 0.5).action == "keep"
    assert decide_call(candidate, answer, 0.7).action == "drop"
    assert decide_call(candidate, answer, 0).action == "keep"
    assert decide_call(candidate, (0.99, 0.99), 1).action == "drop"
    assert decide_call(candidate, (1, 0.99), 1).action == "truncate"


@pytest.mark.parametrize("threshold", [1.1, -0.1, math.nan, math.inf])
def test_bad_threshold_is_rejected(threshold):
    candidate, _ = calls()
    with pytest.raises(ValueError, match="keepThreshold must be between 0 and 1"):
        decide_call(candidate, (0.5, 0.5), threshold)


@pytest.mark.parametrize(
    "answer", [(math.nan, 0), (0, math.inf), (-0.01, 0), (0, 1.01), (True, 0), ("0.5", 0)]
)
def test_invalid_probabilities_are_rejected(answer):
    candidate, _ = calls()
    with pytest.raises(ValueError, match="Invalid keep probabilities"):
        decide_call(candidate, answer, 0.5)
