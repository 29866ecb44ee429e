"""The gate in points of the context window: skip under the target, replace when the target or
the minimum is reached, hand over to the built-in summary only when pruning cannot get there.

Driven through the real hook entry (JSON on stdin) with the context the mod passes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse
from fast_jev_compaction.hook.gate import (
    CHARS_PER_TOKEN,
    EngineLimit,
    Window,
    after_pass,
    before_pass,
    engine_limit_of,
    unmeasured_tokens,
    window_of,
)
from fast_jev_compaction.stats import CompactStats
from test_hook_entry import _bash, compactions, event, run_hook, tool_heavy_conversation


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


OPTIONS = dict(target_percent=40, min_freed_percent=5, min_reduction_ratio=0)


def freed_tokens(tokens: float) -> CompactStats:
    """A pass over 1,000,000 characters that frees this many tokens."""
    return stats(1_000_000, 1_000_000 - round(tokens * CHARS_PER_TOKEN))


def test_compact_replaces_whatever_it_frees_and_skips_when_it_frees_nothing():
    """/compact: the person asked for a compaction, not for the summary."""
    assert after_pass(stats(1000, 1000), Window(100, 1000), "manual", **OPTIONS).verdict == "skip"
    over = after_pass(stats(1000, 1000), Window(700, 1000), "manual", **OPTIONS)
    assert (over.verdict, over.reason) == ("skip", "nothing left to prune; context 70% → 70%, over the 40% target")
    little = after_pass(freed_tokens(10), Window(700, 1000), "manual", **OPTIONS)
    assert (little.verdict, little.reason) == ("replace", "context 70% → 69%")
    assert after_pass(stats(1000, 990), None, "manual", **OPTIONS).verdict == "replace"
    assert after_pass(stats(1000, 1000), None, "manual", **OPTIONS).reason == "nothing left to prune"


def test_the_plugin_trigger_skips_a_pass_that_frees_nothing_even_over_the_target():
    """Found in the real binary: the trigger re-fired after usage grew 10 points in turns
    without tool output, the pass freed nothing, and the summary replaced the verbatim history."""
    result = after_pass(stats(1000, 1000), Window(770, 1000), "plugin", **OPTIONS)
    assert (result.verdict, result.reason) == ("skip", "nothing left to prune; context 77% → 77%, over the 40% target")


def test_the_plugin_trigger_replaces_when_the_target_or_the_minimum_is_reached():
    result = after_pass(stats(10_000, 10_000 - int(400 * CHARS_PER_TOKEN)), Window(600, 1000), "plugin", **OPTIONS)
    assert (result.verdict, result.reason) == ("replace", "context 60% → 20%")
    # Ten points freed, still over the target: the minimum is met.
    result = after_pass(stats(10_000, 10_000 - int(100 * CHARS_PER_TOKEN)), Window(900, 1000), "plugin", **OPTIONS)
    assert result.verdict == "replace"
    # Two points freed and still over the target: the summary has to run.
    result = after_pass(stats(10_000, 10_000 - int(20 * CHARS_PER_TOKEN)), Window(900, 1000), "plugin", **OPTIONS)
    assert (result.verdict, result.category) == ("fallback", "below-target")
    assert "frees only 2% of the window" in result.reason


# The engine under --autocompact 100000 with the default model: it fires at 67k of its 100k
# compaction window; the model's window is 1,000,000 tokens.
SMALL_WINDOW = dict(window=100_000, threshold=67_000, model_window=1_000_000)
# The default: the engine's window is the model's, its threshold 33k under it.
DEFAULT_WINDOW = dict(window=1_000_000, threshold=967_000, model_window=1_000_000)


def limit(tokens: int, window: int, threshold: int, model_window: int) -> EngineLimit:
    return EngineLimit(Window(tokens, window), threshold, model_window)


def test_engine_limit_reads_the_breakdown_figures_the_mod_passes():
    context = {"tokens": 63_935, "window": 1_000_000, "percent": 6, "compaction": {"tokens": 67_900, "window": 100_000, "threshold": 67_000}}
    assert engine_limit_of(context) == limit(67_900, **SMALL_WINDOW)
    for broken in ({"threshold": 67_000}, {"tokens": 67_900, "window": 100_000}, {"tokens": 67_900, "window": 60_000, "threshold": 67_000}):
        assert engine_limit_of({**context, "compaction": broken}) is None
    assert engine_limit_of({"tokens": 1, "window": 1_000_000}) is None
    assert engine_limit_of(None) is None


def test_the_engine_s_own_pass_replaces_once_under_its_threshold_whatever_share_it_frees():
    """Found in the real binary: the engine fired after a large in-flight output over an
    already pruned history; the pass freed 24 % < minReductionRatio and the summary ran."""
    history = stats(100_000, 76_000)  # 24 % of the conversation's characters
    engine = limit(70_300, **SMALL_WINDOW)
    result = after_pass(history, None, "auto", **OPTIONS, engine=engine)
    assert (result.verdict, result.reason) == (
        "replace", "context 70.3% → 63.4% of the 100k-token compaction window, under the engine's 67k threshold"
    )
    # The same pass at its limit in the model's own window: under the threshold, replaced too.
    assert after_pass(freed_tokens(20_000), None, "auto", **OPTIONS, engine=limit(975_000, **DEFAULT_WINDOW)).verdict == "replace"


def test_over_the_threshold_with_room_a_pass_replaces_what_it_frees_and_skips_when_nothing():
    engine = limit(90_000, **SMALL_WINDOW)
    result = after_pass(freed_tokens(1_000), None, "auto", **OPTIONS, engine=engine)
    assert (result.verdict, result.reason) == (
        "replace", "context 90% → 89% of the 100k-token compaction window, over the engine's 67k threshold with room left in the model's window"
    )
    nothing = after_pass(stats(1000, 1000), None, "precompute", **OPTIONS, engine=engine)
    assert (nothing.verdict, nothing.reason) == (
        "skip", "nothing left to prune; context 90% → 90% of the 100k-token compaction window, over the engine's 67k threshold with room left in the model's window"
    )


def test_with_the_model_s_window_full_the_threshold_or_the_minimum_must_be_reached():
    engine = limit(980_000, **DEFAULT_WINDOW)
    assert after_pass(freed_tokens(60_000), None, "auto", **OPTIONS, engine=engine).verdict == "replace"  # 6 points
    short = after_pass(freed_tokens(5_000), None, "auto", **OPTIONS, engine=engine)
    assert (short.verdict, short.category) == ("fallback", "below-target")
    assert short.reason.startswith("pruning cannot bring the context under the engine's 967k threshold (context 98% → 97.5%")
    nothing = after_pass(stats(1000, 1000), None, "auto", **OPTIONS, engine=engine)
    assert (nothing.verdict, nothing.category) == ("fallback", "below-target")


def test_without_the_engine_s_figures_its_pass_replaces_what_it_frees_and_falls_back_on_nothing():
    """A subagent's transcript: the usage is the main conversation's."""
    assert after_pass(stats(1000, 990), Window(900, 1000), "auto", **OPTIONS).verdict == "replace"
    nothing = after_pass(stats(1000, 1000), Window(900, 1000), "auto", **OPTIONS)
    assert (nothing.verdict, nothing.category) == ("fallback", "below-target")


@pytest.mark.parametrize("trigger", ["manual", "plugin", "auto", "precompute"])
def test_a_minimum_reduction_set_above_zero_decides_for_every_trigger(trigger):
    ratio = dict(OPTIONS, min_reduction_ratio=0.25)
    engine = limit(70_300, **SMALL_WINDOW)
    below = after_pass(stats(1000, 800), Window(900, 1000), trigger, **ratio, engine=engine)
    assert (below.verdict, below.category, below.reason) == ("fallback", "below-ratio", "below 25.0% minimum")
    assert after_pass(stats(1000, 700), Window(900, 1000), trigger, **ratio, engine=engine).verdict == "replace"
    # The plugin trigger's pass with nothing left to prune still skips.
    nothing = after_pass(stats(1000, 1000), Window(900, 1000), trigger, **ratio, engine=engine)
    assert nothing.verdict == ("skip" if trigger == "plugin" else "fallback")


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


def engine_context(tokens: int, window: int, threshold: int, model_window: int) -> dict[str, object]:
    """``context`` as the mod sends it for the engine's own compaction (plain figures + breakdown)."""
    plain = tokens - 10_000  # the last response's input, before the output that made the engine fire
    return {
        "tokens": plain, "window": model_window, "percent": 100 * plain // model_window,
        "compaction": {"tokens": tokens, "window": window, "threshold": threshold},
    }


def test_the_engine_s_own_compaction_after_an_earlier_pass_replaces_or_skips_never_summarises(data_dir: Path) -> None:
    """Spawned with JSON on stdin: an already pruned history grows by a long prompt and two
    outputs, the engine fires after the second (in flight, pinned) at 70 % of its compaction
    window. Outputs alone cannot bring it under the 40 % target, so the ladder also moves the
    oldest turn whole to the archive, then the older part of the turn in flight (the long prompt
    alone stays over the target): about a third of the conversation is freed, under the
    engine's threshold, and it replaces (minReductionRatio 0.5, when set, still sends it to the
    summary). Passed again over its own answer it frees nothing: it skips while the model's window
    has room. Once the window is full and nothing is left to move, the summary runs (rung f)."""
    first, _ = run_hook(json.dumps(event(tool_heavy_conversation(), data_dir)).encode(), data_dir)
    assert first["action"] == "replace"
    prose = " ".join(f"design note {n}: the parser keeps every field as it was read." for n in range(1500))
    grown = first["messages"] + [{"role": "user", "text": f"do round two; {prose}", "toolUses": [], "handle": "h-r2"}]
    grown += _bash(6, "seq 100000 103000", "\n".join(str(n) for n in range(100_000, 103_001)), "r2")
    grown += _bash(7, "yes round two | head -n 700", "\n".join("round two build output" for _ in range(700)), "r2")
    context = engine_context(70_000, **SMALL_WINDOW)

    ratio, _ = run_hook(json.dumps(event(grown, data_dir, trigger="auto", context=context, options={"minReductionRatio": 0.5})).encode(), data_dir)
    assert ratio["action"] == "fallback" and re.match(r"below 50.0% minimum: 3\d\.\d% reduction", ratio["reason"]), ratio["reason"]
    second, _ = run_hook(json.dumps(event(grown, data_dir, trigger="auto", context=context)).encode(), data_dir)
    assert second["action"] == "replace", second.get("reason")
    assert re.fullmatch(
        r"6 of 6 tool outputs moved to the archive \(6 dropped, 1 old turn\(s\) moved whole, 1 older part\(s\) of a turn "
        r"moved\), context 70% → "
        r"5\d\.\d% of the 100k-token compaction window, under the engine's 67k threshold, no summary", second["toast"]
    ), second["toast"]
    assert second["messages"][-1]["toolResults"] == grown[-1]["toolResults"]  # in flight: whole
    assert any(m["text"].startswith("do round two;") for m in second["messages"])  # the prompt stays

    again = event(second["messages"], data_dir, trigger="auto", context=engine_context(70_000, **SMALL_WINDOW))
    third, _ = run_hook(json.dumps(again).encode(), data_dir)
    assert third["action"] == "skip" and third["reason"].startswith("nothing left to prune; context 70% → 70% of the 100k-token")
    full = event(second["messages"], data_dir, trigger="auto", context=engine_context(970_000, **DEFAULT_WINDOW))
    fourth, _ = run_hook(json.dumps(full).encode(), data_dir)
    assert fourth["action"] == "fallback" and fourth["reason"].startswith(
        "nothing left to prune; context 97% → 97% of the 1000k-token compaction window, over the engine's 967k "
        "threshold and the model's window is full")
    rows = [(row.trigger, row.outcome, row.fallback_reason) for row, _ in compactions(data_dir)]
    assert rows == [
        ("manual", "replaced", None), ("auto", "fallback", "below-ratio"), ("auto", "replaced", None),
        ("auto", "skipped", None), ("auto", "fallback", "below-target"),
    ]


def test_the_toast_counts_calls_and_shows_the_window(data_dir: Path) -> None:
    doc = event(tool_heavy_conversation(), data_dir, context={"tokens": 61_000, "window": 100_000})
    answer, _ = run_hook(json.dumps(doc).encode(), data_dir)
    assert answer["action"] == "replace"
    # No old turn to move (the conversation is one turn), so the pin shrinks to the turn in
    # flight, and its older part moves to the archive (rung e): 4 of 4 unpinned outputs, not 2 of 2.
    assert answer["toast"].startswith(
        "4 of 4 tool outputs moved to the archive (4 dropped, 1 older part(s) of a turn moved), context 61% → "
    )
    assert answer["toast"].endswith(", no summary")


# --- the whole context: the last reply and what came after it -----------------------------------

SONNET_WINDOW = dict(window=200_000, threshold=167_000, model_window=200_000)  # --autocompact 200000


def test_a_pass_that_frees_nothing_never_replaces_under_the_engine_s_threshold_either():
    """The figures as the real ``claude`` handed them (161,622 of 200k, the last reply left
    out): the pass freed nothing and answered replace, "under the engine's 167k threshold"."""
    as_handed = limit(161_622, **SONNET_WINDOW)
    nothing = after_pass(stats(700_000, 700_000), None, "auto", **OPTIONS, engine=as_handed)
    assert (nothing.verdict, nothing.reason) == (
        "skip", "nothing left to prune; context 80.8% → 80.8% of the 200k-token compaction window, under the "
        "engine's 167k threshold with room left in the model's window")
    whole = limit(189_153, **SONNET_WINDOW)  # where the engine's own compaction fired
    full = after_pass(stats(700_000, 700_000), None, "auto", **OPTIONS, engine=whole)
    assert (full.verdict, full.category, full.reason) == (
        "fallback", "below-target", "nothing left to prune; context 94.6% → 94.6% of the 200k-token compaction "
        "window, over the engine's 167k threshold and the model's window is full")


def _reply(text: str, handle: str) -> SessionMessage:
    return SessionMessage(role="assistant", text=text, handle=handle)


def test_the_unmeasured_tokens_are_the_last_response_and_what_came_after_it():
    prompt = SessionMessage(role="user", text="p" * 700)
    call = ToolUse(tool_use_id="t1", tool="Bash", input={"command": "ls"}, text="a b")
    assert unmeasured_tokens([]) == 0
    assert unmeasured_tokens([prompt]) == 0  # no response yet: the request held it all
    assert unmeasured_tokens([prompt, _reply("r" * 3500, "a1")]) == 1000
    # A response is one message per block; the results and a new prompt after it count too.
    result = SessionMessage(role="user", toolResults=(ToolResult(tool_use_id="t1", text="x" * 3467),))
    turn = [prompt, _reply("older" * 700, "a0"), prompt, _reply("r" * 17, "a1"), SessionMessage(role="assistant", toolUses=(call,)), result]
    assert unmeasured_tokens(turn) == 1000
    assert unmeasured_tokens([*turn, prompt]) == 1200


def test_the_engine_s_context_holds_the_unmeasured_tokens_once():
    context = {"tokens": 161_622, "window": 200_000, "percent": 80,
               "compaction": {"tokens": 161_622, "window": 200_000, "threshold": 167_000}}
    assert window_of(context, 27_502) == Window(189_124, 200_000)
    assert engine_limit_of(context, 27_502) == limit(189_124, **SONNET_WINDOW)
    # A breakdown that already counts the reply is not raised by it again.
    counted = {**context, "compaction": {**context["compaction"], "tokens": 189_153}}
    assert engine_limit_of(counted, 27_502) == limit(189_153, **SONNET_WINDOW)


def test_six_long_replies_are_judged_with_the_last_one_and_move_to_the_archive_as_old_turns(data_dir: Path) -> None:
    """The real session, spawned with JSON on stdin: six ~110 kB prose replies, the figures of
    the request before the last reply. The window holds that reply (96 %, over the engine's
    threshold); no tool output is left to cut, so the ladder moves the oldest turns whole to the
    archive, prompts staying, and the summary never runs."""
    paragraph = "The ledger keeps every entry in the order it was posted, with its running balance. "
    messages: list[dict[str, object]] = []
    for turn in range(6):
        messages.append({"role": "user", "text": f"Write part {turn + 1} of the essay.", "toolUses": [], "handle": f"u{turn}"})
        messages.append({"role": "assistant", "text": paragraph * 1300, "toolUses": [], "handle": f"a{turn}"})
    context = {"tokens": 161_622, "window": 200_000, "percent": 80,
               "compaction": {"tokens": 161_622, "window": 200_000, "threshold": 167_000}}
    answer, _ = run_hook(json.dumps(event(messages, data_dir, trigger="auto", context=context)).encode(), data_dir)
    assert answer["action"] == "replace", answer
    assert re.search(r"old turn\(s\) moved whole\), context 9\d\.\d% → [1-3]\d\.\d% of the 200k-token", answer["toast"]), answer["toast"]
    prompts = [m["text"] for m in answer["messages"] if m["role"] == "user" and m["text"].startswith("Write part")]
    assert prompts == [f"Write part {n} of the essay." for n in range(1, 7)]
    [(row, _decisions)] = compactions(data_dir)
    assert row.outcome == "replaced"


def test_the_plugin_trigger_s_window_holds_the_last_reply(data_dir: Path) -> None:
    """38 % measured, and a 35,000-character reply after it: 48 %, over the 40 % target."""
    messages = [
        {"role": "user", "text": "Describe the ledger.", "toolUses": [], "handle": "u0"},
        {"role": "assistant", "text": "x" * 35_000, "toolUses": [], "handle": "a0"},
    ]
    context = {"tokens": 38_000, "window": 100_000, "percent": 38}
    answer, _ = run_hook(json.dumps(event(messages, data_dir, trigger="plugin", context=context)).encode(), data_dir)
    assert (answer["action"], answer["reason"]) == ("skip", "nothing left to prune; context 48% → 48%, over the 40% target")


def test_before_pass_runs_the_pass_with_the_window_exactly_at_the_target():
    assert before_pass(Window(400, 1000), "plugin", 40) is None
    assert before_pass(Window(399, 1000), "plugin", 40) is not None


def test_after_pass_plugin_gate_replaces_exactly_at_the_target_and_exactly_at_the_minimum():
    # 42% → 40%: two points freed (under the 5-point minimum), landing exactly on the target.
    at_target = after_pass(freed_tokens(20), Window(420, 1000), "plugin", **OPTIONS)
    assert (at_target.verdict, at_target.reason) == ("replace", "context 42% → 40%")
    # 90% → 85%: over the target, exactly the minimum freed.
    at_minimum = after_pass(freed_tokens(50), Window(900, 1000), "plugin", **OPTIONS)
    assert (at_minimum.verdict, at_minimum.reason) == ("replace", "context 90% → 85%")
    short = after_pass(freed_tokens(49), Window(900, 1000), "plugin", **OPTIONS)
    assert short.verdict == "fallback"


def test_after_pass_engine_gate_counts_a_context_exactly_at_the_threshold_as_over_it():
    with_room = after_pass(freed_tokens(3_000), None, "auto", **OPTIONS, engine=limit(70_000, **SMALL_WINDOW))
    assert with_room.reason.endswith("over the engine's 67k threshold with room left in the model's window")
    # At the threshold in the model's own window, the buffer past it no longer fits: no room.
    full = after_pass(freed_tokens(3_000), None, "auto", **OPTIONS, engine=limit(970_000, **DEFAULT_WINDOW))
    assert (full.verdict, full.category) == ("fallback", "below-target")
    assert limit(967_000, **DEFAULT_WINDOW).has_room(0) is False
    assert limit(966_999, **DEFAULT_WINDOW).has_room(0) is True
