"""The ladder frees what the window needs and no more (``give_back.py``): a cut that frees far
more than was missing leaves a surplus, spent on the outputs cut last, most recent first: whole
again when one fits, else a wider digest; the context still ends under its aim."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fast_jev_compaction.compaction import CompactResult, run_sync
from fast_jev_compaction.conversation.messages import BLOCK_FIELDS, RECORD_FIELDS
from fast_jev_compaction.decide.decisions import KEEP, TRUNCATE, UNDER_TARGET
from fast_jev_compaction.decide.policy import chars_to_free
from fast_jev_compaction.ladder import compact_to_fit
from fast_jev_compaction.options import resolve_options
from test_ladder import TARGET_PERCENT, ValueJudge, by_id, chars, reads, window_needing


def fit(messages: Any, window: int, values: dict[str, float], archive: str | None = "/archive") -> CompactResult:
    opts = resolve_options(
        window_tokens=window, target_percent=TARGET_PERCENT, preserve_recent_messages=2, archive_dir=archive
    )
    return run_sync(compact_to_fit(messages, ValueJudge(values), opts), waits=False)


def results_of(out: CompactResult) -> dict[str, str]:
    return {r.tool_use_id: r.text for m in out.messages for r in m.toolResults or ()}


def test_a_cut_that_frees_far_more_than_the_need_gives_the_recent_outputs_back_whole() -> None:
    # The huge read is older and valued least but one: cutting the least valued (the recent one)
    # falls short, cutting the huge one too frees far more than was missing.
    messages = reads({"huge": 40_000, "recent": 7_000, "other": 1_000})
    need = 9_000
    window = window_needing(messages, need)
    out = fit(messages, window, {"recent": 0.1, "huge": 0.2})
    decisions = by_id(out)
    assert decisions["huge"].action == TRUNCATE
    # The recent output fits in what the huge one's cut freed beyond the need: it is back whole.
    assert decisions["recent"].action == KEEP and decisions["recent"].reason == UNDER_TARGET
    original = {r.tool_use_id: r.text for m in messages for r in m.toolResults or ()}
    assert results_of(out)["recent"] == original["recent"]
    assert decisions["recent"].archive_path is None and len(out.archive) == 1
    # Still under the aim, and the figures say what the context holds.
    opts = resolve_options(window_tokens=window, target_percent=TARGET_PERCENT)
    assert chars(messages) - out.stats.chars_after >= (chars_to_free(chars(messages), opts) or 0)
    assert out.stats.chars_after == chars(out.messages)
    assert out.stats.truncated == 1 and out.stats.kept == 2


def test_what_is_left_of_the_surplus_widens_the_digest_of_an_output_too_large_to_go_back() -> None:
    messages = reads({"huge": 40_000, "other": 1_000})
    need = 9_000
    window = window_needing(messages, need)
    out = fit(messages, window, {"huge": 0.1})
    decision = by_id(out)["huge"]
    digest = results_of(out)["huge"]
    assert decision.action == TRUNCATE
    # Wider than the default digest (800 characters and its note), within the surplus.
    assert 2_000 < len(digest) < 40_000 - need
    original = {r.tool_use_id: r.text for m in messages for r in m.toolResults or ()}["huge"]
    assert decision.chars_freed == len(original) - len(digest)
    assert digest.rstrip().endswith("Read it if needed]") and decision.archive_path in digest
    assert out.stats.chars_after == chars(out.messages)


def test_a_pass_that_frees_just_the_need_gives_nothing_back() -> None:
    messages = reads({"a": 7_000, "b": 7_000, "c": 7_000, "other": 1_000})
    # Two of the three cuts meet the need nearly exactly: nothing to spend.
    out = fit(messages, window_needing(messages, 12_500), {"a": 0.1, "b": 0.2, "c": 0.9})
    decisions = by_id(out)
    assert [decisions[k].action for k in "abc"] == [TRUNCATE, TRUNCATE, KEEP]
    assert decisions["c"].reason != UNDER_TARGET


def test_without_a_window_nothing_is_given_back() -> None:
    messages = reads({"huge": 40_000, "recent": 7_000, "other": 1_000})
    opts = resolve_options(preserve_recent_messages=2, archive_dir="/archive")
    out = run_sync(compact_to_fit(messages, ValueJudge({"recent": 0.1, "huge": 0.2}), opts), waits=False)
    assert {d.tool_use_id for d in out.decisions if d.action == TRUNCATE} == {"huge", "recent"}


def test_an_output_given_back_whole_comes_back_with_its_call_and_record_as_they_were() -> None:
    """As a transcript reads them: each call carries a copy of its output and its block's own
    members (``caller``), each result its record's fields (``toolUseResult``). What goes back
    whole is the original call and result; a wider digest keeps the call's block members only."""
    plain = reads({"huge": 40_000, "recent": 7_000, "other": 1_000})
    outputs = {r.tool_use_id: r.text for m in plain for r in m.toolResults or ()}
    messages = [
        replace(
            m,
            toolUses=tuple(replace(u, text=outputs[u.tool_use_id], extra={BLOCK_FIELDS: {"caller": {"type": "direct"}},
                                                                          RECORD_FIELDS: {"toolUseResult": {"file": u.tool_use_id}}})
                           for u in m.toolUses),
            toolResults=tuple(replace(r, extra={RECORD_FIELDS: {"toolUseResult": {"file": r.tool_use_id}}}) for r in m.toolResults or ()),
        )
        for m in plain
    ]
    out = fit(messages, window_needing(messages, 9_000), {"recent": 0.1, "huge": 0.2})
    assert by_id(out)["recent"].reason == UNDER_TARGET
    calls = {u.tool_use_id: u for m in out.messages for u in m.toolUses}
    results = {r.tool_use_id: r for m in out.messages for r in m.toolResults or ()}
    originals = {u.tool_use_id: u for m in messages for u in m.toolUses}
    original_results = {r.tool_use_id: r for m in messages for r in m.toolResults or ()}
    assert calls["recent"] is originals["recent"] and results["recent"] is original_results["recent"]
    assert by_id(out)["huge"].action == TRUNCATE
    assert calls["huge"].extra == {BLOCK_FIELDS: {"caller": {"type": "direct"}}} and calls["huge"].text == results["huge"].text
