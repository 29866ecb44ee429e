"""Benchmark of the fitted judge's scoring (speed lives here, not in timed tests)."""

from __future__ import annotations

from pathlib import Path

from fast_jev_compaction.goal import goal_from_messages
from fast_jev_compaction.judge.model import score_calls
from fast_jev_compaction.pairing import pair_tool_calls
from fast_jev_compaction.transcript import read_messages

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "session.jsonl"


def test_bench_score_calls(benchmark) -> None:  # type: ignore[no-untyped-def]
    messages = read_messages(EXAMPLE)
    pairing = pair_tool_calls(messages, 6)
    scores = benchmark(score_calls, messages, pairing, goal_from_messages(messages))
    assert set(scores) == {call.tool_use_id for call in pairing.calls}
