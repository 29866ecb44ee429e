"""The gate in points of the context window: skip under the target, replace when the target or
the minimum is reached, hand over to the built-in summary only when pruning cannot get there.

Driven through the real hook entry (JSON on stdin) with the context the mod passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fast_jev_compaction.hook.gate import CHARS_PER_TOKEN, Window, after_pass, before_pass, window_of
from fast_jev_compaction.stats import CompactStats
from test_hook_entry import compactions, event, run_hook, tool_heavy_conversation


def stats(before: int, after: int) -> CompactStats:
    return CompactStats(chars_before=before, chars_after=after)


@pytest.mark.parametrize(
    "context, expected",
    [
        ({"tokens": 600, "window": 1000, "percent": 60}, Window(600, 1000)),
        ({"tokens": 0, "window": 1000}, None),
        ({"window": 1000, "percent": 0}, None),  # right after a compaction the engine has no count
        ({"tokens": True, "window": 1000}, None),
        (None, None),
        ("60%", None),
    ],
)
def test_window_of_reads_only_usable_figures(context, expected):
    assert window_of(context) == expected


def test_under_the_target_an_automatic_pass_skips_before_any_work():
    result = before_pass(Window(230, 1000), "plugin", 40)
    assert result is not None and result.verdict == "skip" and result.reason == "context at 23% is under the 40% target"
    assert before_pass(Window(230, 1000), "manual", 40) is None  # /compact always runs the pass
    assert before_pass(Window(230, 1000), "auto", 40) is None  # the engine needs room whatever the window says
    assert before_pass(Window(610, 1000), "plugin", 40) is None
    assert before_pass(None, "auto", 40) is None


def test_a_pass_that_frees_nothing_under_the_target_skips_and_over_it_falls_back():
    options = dict(target_percent=40, min_freed_percent=5, min_reduction_ratio=0.25)
    assert after_pass(stats(1000, 1000), Window(100, 1000), "manual", **options).verdict == "skip"
    over = after_pass(stats(1000, 1000), Window(700, 1000), "manual", **options)
    assert (over.verdict, over.category) == ("fallback", "below-target")


def test_the_plugin_trigger_skips_a_pass_that_frees_nothing_even_over_the_target():
    """Found in the real binary: the trigger re-fired after usage grew 10 points in turns
    without tool output, the pass freed nothing, and the summary replaced the verbatim history."""
    options = dict(target_percent=40, min_freed_percent=5, min_reduction_ratio=0.25)
    result = after_pass(stats(1000, 1000), Window(770, 1000), "plugin", **options)
    assert (result.verdict, result.reason) == ("skip", "nothing left to prune; context 77% → 77%, over the 40% target")


def test_replace_when_the_target_or_the_minimum_is_reached():
    options = dict(target_percent=40, min_freed_percent=5, min_reduction_ratio=0.25)
    freed_tokens = 400
    result = after_pass(stats(10_000, 10_000 - int(freed_tokens * CHARS_PER_TOKEN)), Window(600, 1000), "manual", **options)
    assert (result.verdict, result.reason) == ("replace", "context 60% → 20%")
    # Ten points freed, still over the target: the minimum is met.
    result = after_pass(stats(10_000, 10_000 - int(100 * CHARS_PER_TOKEN)), Window(900, 1000), "plugin", **options)
    assert result.verdict == "replace"
    # Two points freed and still over the target: the summary has to run.
    result = after_pass(stats(10_000, 10_000 - int(20 * CHARS_PER_TOKEN)), Window(900, 1000), "plugin", **options)
    assert (result.verdict, result.category) == ("fallback", "below-target")
    assert "frees only 2% of the window" in result.reason


@pytest.mark.parametrize("window, trigger", [(None, "manual"), (Window(100, 1000), "auto"), (Window(900, 1000), "precompute")])
def test_without_a_window_or_for_the_engine_s_own_trigger_the_ratio_decides(window, trigger):
    options = dict(target_percent=40, min_freed_percent=5, min_reduction_ratio=0.25)
    assert after_pass(stats(1000, 800), window, trigger, **options).verdict == "fallback"
    assert after_pass(stats(1000, 700), window, trigger, **options).verdict == "replace"


def test_second_pass_over_an_already_pruned_history_never_summarises(data_dir: Path) -> None:
    """The seed system's #70: a later pass that finds nothing left to prune ran the summary."""
    first, _ = run_hook(json.dumps(event(tool_heavy_conversation(), data_dir, context={"tokens": 61_000, "window": 100_000})).encode(), data_dir)
    assert first["action"] == "replace"
    again = event(first["messages"], data_dir, trigger="plugin", context={"tokens": 30_000, "window": 100_000})
    second, _ = run_hook(json.dumps(again).encode(), data_dir)
    assert second["action"] == "skip" and "under the 40% target" in second["reason"]
    manual = event(first["messages"], data_dir, context={"tokens": 30_000, "window": 100_000})
    third, _ = run_hook(json.dumps(manual).encode(), data_dir)
    assert third["action"] == "skip" and third["reason"].startswith("nothing left to prune")
    # Over the target, the plugin's own trigger still skips: the engine's compaction is the backstop.
    over = event(first["messages"], data_dir, trigger="plugin", context={"tokens": 77_000, "window": 100_000})
    fourth, _ = run_hook(json.dumps(over).encode(), data_dir)
    assert fourth["action"] == "skip" and fourth["reason"].startswith("nothing left to prune; context 77% → 77%")
    assert "messages" not in fourth  # the history stays as the engine has it
    outcomes = [row.outcome for row, _ in compactions(data_dir)]
    assert outcomes == ["replaced", "skipped", "skipped", "skipped"]


def test_the_toast_counts_calls_and_shows_the_window(data_dir: Path) -> None:
    doc = event(tool_heavy_conversation(), data_dir, context={"tokens": 61_000, "window": 100_000})
    answer, _ = run_hook(json.dumps(doc).encode(), data_dir)
    assert answer["action"] == "replace"
    assert answer["toast"].startswith("2 of 2 tool outputs moved to the archive (2 cut to digests), context 61% → ")
    assert answer["toast"].endswith(", no summary")
