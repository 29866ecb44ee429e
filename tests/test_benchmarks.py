"""Speed benchmarks (pytest-benchmark). Disabled by default (``--benchmark-disable`` in
pyproject): each then runs once as an ordinary test of its result. Time them with
``pytest tests/test_benchmarks.py --benchmark-enable``; ``fast-jev bench`` reports the same core
per 1,000 messages, and ``fast-jev bench --synthetic 5000 --synthetic 50000`` its linearity."""

from __future__ import annotations

import json

import pytest

from fast_jev_compaction.commands.bench import CORE_OPTIONS, ConstantAsker
from fast_jev_compaction.compaction import compact_sync
from fast_jev_compaction.conversation.transcript import parse_transcript
from fast_jev_compaction.evaluation.synthetic import transcript_lines
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.state.tokens import _accumulated, estimate_tokens
from fast_jev_compaction.textutil import js_json


@pytest.fixture(scope="module")
def session():
    return parse_transcript(list(transcript_lines(2000)))


@pytest.fixture(scope="module")
def session_past_one_state():
    # About 490 calls: the input stages do not fit, and fitting must learn that cheaply.
    return parse_transcript(list(transcript_lines(1000)))


def test_estimate_tokens_of_a_large_state(benchmark):
    text = js_json([json.loads(line) for line in transcript_lines(400)])
    assert benchmark(estimate_tokens, text) == _accumulated(text)


def test_core_without_the_judge(benchmark, session):
    asker = ConstantAsker(measure=True)
    result = benchmark(compact_sync, session, asker, CORE_OPTIONS)
    assert result.stats.requests >= 1
    assert 0 < asker.largest_request <= 30_000
    assert result.stats.chars_after < result.stats.chars_before


def test_core_when_one_state_cannot_fit(benchmark, session_past_one_state):
    result = benchmark(compact_sync, session_past_one_state, ConstantAsker(), CORE_OPTIONS)
    assert result.stats.windows >= 1


def test_compaction_with_the_embedded_judge(benchmark, session):
    result = benchmark(compact_sync, session, LocalJudge())
    assert result.stats.requests == 0  # scored in process
    assert result.stats.chars_after < result.stats.chars_before


def _plan_inputs(session):  # type: ignore[no-untyped-def]
    from fast_jev_compaction.conversation.pairing import pair_tool_calls
    from fast_jev_compaction.state.goal import goal_from_messages
    from fast_jev_compaction.state.questions import question_tokens

    pairing = pair_tool_calls(session, CORE_OPTIONS.preserve_recent_messages)
    to_judge = list(pairing.candidates)
    costs = {call.id: question_tokens(call) for call in to_judge}
    return (session, pairing, to_judge, goal_from_messages(session), CORE_OPTIONS.preserve_recent_messages,
            CORE_OPTIONS.max_state_tokens, CORE_OPTIONS.max_request_tokens, costs)


@pytest.mark.parametrize("size", [200, 2000])
def test_state_path(benchmark, size):
    """The state path alone (windows.plan_requests: the single state against the windows, the
    requests' states), on a session that fits one state and on one that needs windows."""
    from fast_jev_compaction.state.questions import REQUEST_OVERHEAD_TOKENS
    from fast_jev_compaction.state.windows import plan_requests

    inputs = _plan_inputs(parse_transcript(list(transcript_lines(size))))
    requests = benchmark(plan_requests, *inputs)
    asked = [call.id for request in requests for call in request.calls]
    assert sorted(asked) == sorted(call.id for call in inputs[2])
    costs = inputs[-1]
    assert all(
        REQUEST_OVERHEAD_TOKENS + r.state_tokens + sum(costs[c.id] for c in r.calls) <= CORE_OPTIONS.max_request_tokens
        for r in requests
    )
    assert (requests[0].stage == "windowed") == (size == 2000)
