"""Benchmarks of the fitted judge's scoring (speed lives here, not in timed tests).

``fast-jev bench`` reports the same scoring within whole compactions ("embedded judge's
scoring"); these time it alone, on the example session and on a generated 2,000-message one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.conversation.transcript import parse_transcript, read_messages
from fast_jev_compaction.decide.rules import call_facts, settle
from fast_jev_compaction.evaluation.synthetic import transcript_lines
from fast_jev_compaction.judge.model import score_calls
from fast_jev_compaction.state.goal import goal_from_messages

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "session.jsonl"


def test_bench_score_calls(benchmark) -> None:  # type: ignore[no-untyped-def]
    messages = read_messages(EXAMPLE)
    pairing = pair_tool_calls(messages, 6)
    scores = benchmark(score_calls, messages, pairing, goal_from_messages(messages))
    assert set(scores) == {call.tool_use_id for call in pairing.calls}


@pytest.fixture(scope="module")
def session():  # type: ignore[no-untyped-def]
    return parse_transcript(list(transcript_lines(2000)))


def test_bench_score_the_calls_a_compaction_asks_about(benchmark, session) -> None:  # type: ignore[no-untyped-def]
    """What a compaction with the embedded judge scores: the candidates no rule settled."""
    pairing = pair_tool_calls(session, 6)
    settled = settle(call_facts(pairing.calls), len(session))
    asked = [call for call in pairing.candidates if call.tool_use_id not in settled]
    scores = benchmark(score_calls, session, pairing, goal_from_messages(session), only=asked)
    assert set(scores) == {call.tool_use_id for call in asked}
    assert all(0.0 < keep_result <= keep_call < 1.0 for keep_call, keep_result in scores.values())
    # the scores tell the calls apart
    assert len({round(keep_result, 6) for _, keep_result in scores.values()}) > len(asked) // 4
