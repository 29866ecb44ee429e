"""The embedded judge's keep_call on Jev's scale: the threshold policy at 0.5 keeps the needle a
later prompt asks for and removes most of the tool output; the budget policy decides as before.
The judge behind ``fast-jev serve`` (judge/state_weights.json) answers on the same scale."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from fast_jev_compaction.compaction import compact, compact_sync
from fast_jev_compaction.conversation.sizes import input_chars
from fast_jev_compaction.decide.policy import CHEAP
from fast_jev_compaction.evaluation.fit import CALL_REUSE_AT_EVEN
from fast_jev_compaction.evaluation.state_fit import STATE_FITTED_FEATURES
from fast_jev_compaction.evaluation.through_jev import served_judge
from fast_jev_compaction.jev.client import JevClient
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.judge.model import JudgeModel, ModelError, load_model, load_state_model, parse_model
from fast_jev_compaction.options import CompactOptions
from needle_sessions import needle_session
from planted_sessions import planted_session

SEEDS = range(30)


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_keep_call_answers_even_at_the_budget_cheap_line_and_keep_result_is_the_reuse_risk() -> None:
    model = load_model()
    assert model.call_reuse_at_even == CALL_REUSE_AT_EVEN == CHEAP
    values = {"size_log": 3.0}
    even = JudgeModel(bias=_logit(CHEAP) - model.weights["size_log"] * 3.0, weights=model.weights,
                      call_reuse_at_even=model.call_reuse_at_even)
    assert even.keep_result(values) == pytest.approx(CHEAP)
    assert even.keep_call(values, even.keep_result(values)) == pytest.approx(0.5)
    # a kind's floor still lifts the call: an edit's record is worth more than its reuse says
    floored = replace(even, call_floors={"edit": 0.9})
    edit = {**values, "kind_edit": 1.0}
    assert floored.keep_call(edit, floored.keep_result(edit)) == pytest.approx(1 - 0.5 * 0.1)


def test_the_call_scale_is_read_written_and_checked() -> None:
    model = load_model()
    again = parse_model(json.loads(json.dumps(model.to_json())))
    assert again.call_reuse_at_even == model.call_reuse_at_even
    data = model.to_json()
    del data["keep_call"]["reuse_at_even"]
    assert parse_model(data).call_reuse_at_even == 0.5  # an older file: keep_call on keep_result's scale
    for bad in (0.0, 1.0, float("nan")):
        data["keep_call"]["reuse_at_even"] = bad
        with pytest.raises(ModelError):
            parse_model(data)


def _context(messages) -> str:
    return "\n".join([m.text for m in messages] + [r.text for m in messages for r in m.toolResults or ()])


def _tool_io(messages) -> int:
    return sum(input_chars(u.input) for m in messages for u in m.toolUses) + sum(
        len(r.text) for m in messages for r in m.toolResults or ()
    )


def test_the_threshold_policy_at_one_half_keeps_the_needles_asked_for_and_removes_most(tmp_path: Path) -> None:
    options = CompactOptions(policy="threshold", keep_threshold=0.5, archive_dir=str(tmp_path))
    kept = before = after = 0
    for seed in SEEDS:
        session = needle_session(seed)
        result = compact_sync(session.messages, LocalJudge(), options)
        kept += session.needle in _context(result.messages)
        before += _tool_io(session.messages)
        after += _tool_io(result.messages)
    assert kept / len(SEEDS) >= 0.9, kept
    assert 1 - after / before >= 0.5, 1 - after / before


@pytest.mark.parametrize("window", [0, 12_000], ids=["target share", "window"])
def test_the_budget_policy_decides_as_it_did_on_the_reuse_scale(tmp_path: Path, window: int) -> None:
    shipped = load_model()
    uncalibrated = replace(shipped, call_reuse_at_even=0.5)
    sessions = [needle_session(seed).messages for seed in range(10)] + [planted_session(seed).messages for seed in range(5)]
    lifted = 0
    for n, messages in enumerate(sessions):
        options = CompactOptions(archive_dir=str(tmp_path / str(n)), window_tokens=window)
        now = compact_sync(messages, LocalJudge(shipped), options).decisions
        then = compact_sync(messages, LocalJudge(uncalibrated), options).decisions
        assert [(d.tool_use_id, d.action, d.reason, d.keep_result) for d in now] == [
            (d.tool_use_id, d.action, d.reason, d.keep_result) for d in then
        ]
        lifted += sum(a.keep_call > b.keep_call for a, b in zip(now, then))
    assert lifted > 0  # the calls' answers did move to the new scale


def test_the_served_judge_is_fitted_on_its_chosen_features_and_answers_keep_call_on_the_same_scale() -> None:
    state = load_state_model()
    assert state.call_reuse_at_even == CALL_REUSE_AT_EVEN
    assert set(state.weights) == set(STATE_FITTED_FEATURES)
    assert state.call_floors == load_model().call_floors and state.error_floor == load_model().error_floor


def test_the_served_judge_at_one_half_keeps_the_needles_asked_for_and_removes_much(tmp_path: Path) -> None:
    """Through a real `fast-jev serve` on 127.0.0.1: the state judge's keep_call at 0.5 keeps the
    needles as the embedded judge's does (it kept 17 of 60 before its refit on this scale)."""
    options = CompactOptions(policy="threshold", keep_threshold=0.5, archive_dir=str(tmp_path))
    kept = before = after = 0
    with served_judge() as url:
        for seed in SEEDS:
            session = needle_session(seed)

            async def run(messages=session.messages):  # type: ignore[no-untyped-def]
                async with JevClient(base_url=url) as client:
                    return await compact(messages, client, options)

            result = asyncio.run(run())
            assert result.stats.requests > 0  # asked through the server, not settled in process
            kept += session.needle in _context(result.messages)
            before += _tool_io(session.messages)
            after += _tool_io(result.messages)
    assert kept / len(SEEDS) >= 0.9, kept
    assert 1 - after / before >= 0.4, 1 - after / before
