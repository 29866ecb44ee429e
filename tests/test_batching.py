"""Questions, batching and bounded concurrency (upstream §5, §8.1 "batching", regression 05's
pool side)."""

from __future__ import annotations

import asyncio

import pytest

from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.errors import FittingError
from fast_jev_compaction.state.batches import run_bounded
from fast_jev_compaction.state.questions import (
    REQUEST_OVERHEAD_TOKENS,
    batch_calls,
    batch_questions,
    question_tokens,
    questions_for,
)
from fast_jev_compaction.state.tokens import estimate_tokens
from fast_jev_compaction.textutil import js_json
from scripted_asker import read_pairs


def ten_calls():
    return pair_tool_calls(read_pairs(10), 0).candidates


def test_question_cost_is_the_estimate_of_the_pair_object():
    call = ten_calls()[0]
    assert question_tokens(call) == estimate_tokens(js_json(questions_for(call)))
    assert list(questions_for(call)) == ["call_t1", "result_t1"]
    assert all(q["type"] == "noul" and "criteria" not in q for q in questions_for(call).values())


def test_everything_in_one_batch_when_it_fits():
    calls = ten_calls()
    assert batch_calls(calls, 1000, 30_000) == [calls]


def test_split_keeps_order_and_is_greedy():
    calls = ten_calls()
    batches = batch_calls(calls, 29_600, 30_000)
    budget = 30_000 - 29_600 - REQUEST_OVERHEAD_TOKENS
    assert len(batches) > 1
    assert [c for batch in batches for c in batch] == calls
    for k, batch in enumerate(batches):
        assert batch and sum(question_tokens(c) for c in batch) <= budget
        if k + 1 < len(batches):
            # A batch is closed only when the next call would not fit in it.
            assert sum(question_tokens(c) for c in batch) + question_tokens(batches[k + 1][0]) > budget


def test_a_batch_may_fill_the_budget_exactly():
    calls = ten_calls()[:4]
    exact = sum(question_tokens(c) for c in calls[:3])
    batches = batch_calls(calls, 1000, 1000 + REQUEST_OVERHEAD_TOKENS + exact)
    assert [len(b) for b in batches] == [3, 1]
    # One token less and the third call moves to the next batch.
    assert [len(b) for b in batch_calls(calls, 1000, 1000 + REQUEST_OVERHEAD_TOKENS + exact - 1)] == [2, 2]


def test_no_room_for_a_single_call():
    with pytest.raises(FittingError, match=r"^state leaves no room for questions \(~29990 of 30000 tokens\)$"):
        batch_calls(ten_calls(), 29_990, 30_000)


def test_no_candidates_no_batches():
    assert batch_calls([], 29_999, 30_000) == []


def test_batch_questions_merge_pairs_in_call_order():
    calls = ten_calls()[:3]
    assert list(batch_questions(calls)) == ["call_t1", "result_t1", "call_t2", "result_t2", "call_t3", "result_t3"]


class Pool:
    """Jobs that record overlap; ``fail`` holds job indexes that raise."""

    def __init__(self, count: int, fail: set[int] = frozenset()):
        self.count, self.fail = count, fail
        self.started: list[int] = []
        self.finished: list[int] = []
        self.in_flight = self.peak = 0

    def jobs(self):
        def make(index: int):
            async def job():
                self.started.append(index)
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
                try:
                    for _ in range(3):
                        await asyncio.sleep(0)
                    if index in self.fail:
                        raise RuntimeError(f"job {index}")
                    self.finished.append(index)
                    return index * 10
                finally:
                    self.in_flight -= 1

            return job

        return [make(i) for i in range(self.count)]


@pytest.mark.parametrize("limit, count", [(1, 5), (2, 7), (4, 9), (8, 3)])
def test_pool_bounds_overlap_and_keeps_result_order(limit, count):
    pool = Pool(count)
    assert asyncio.run(run_bounded(pool.jobs(), limit)) == [i * 10 for i in range(count)]
    # The jobs yield, so a pool that honours its limit reaches it exactly: ≤ proves the bound,
    # = proves the jobs really ran concurrently.
    assert pool.peak == min(limit, count)


def test_first_failure_stops_the_queue_lets_in_flight_settle_and_is_raised():
    pool = Pool(6, fail={0, 1})
    with pytest.raises(RuntimeError, match="^job 0$"):
        asyncio.run(run_bounded(pool.jobs(), 3))
    assert pool.started == [0, 1, 2]  # nothing queued starts after the failure
    assert pool.finished == [2]  # the in-flight job ran to completion
    assert pool.in_flight == 0


def test_limit_one_failure_sends_one():
    pool = Pool(4, fail={0})
    with pytest.raises(RuntimeError):
        asyncio.run(run_bounded(pool.jobs(), 1))
    assert pool.started == [0]


def test_no_jobs():
    assert asyncio.run(run_bounded([], 4)) == []
