"""Tiny windows: the ladder's last textual step folds the conversation before the turn in flight
into one file and one note, only where that frees more than the note costs and brings the context
under its target."""

from __future__ import annotations

from pathlib import Path

from fast_jev_compaction.compaction import run_sync
from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse
from fast_jev_compaction.conversation.sizes import message_chars
from fast_jev_compaction.decide.markers import carries_mark, is_fold_note, saved_path
from fast_jev_compaction.decide.policy import CHARS_PER_TOKEN
from fast_jev_compaction.decide.turn_eviction import fold_old_turns, in_flight_preserve, is_prompt, least_chars
from fast_jev_compaction.evaluation.outcome import Context, read_archived
from fast_jev_compaction.evaluation.quality import window_filled
from fast_jev_compaction.hook.turns import regroup, turn_problems
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.ladder import compact_to_fit
from fast_jev_compaction.options import DEFAULT_TARGET_PERCENT, CompactOptions
from fast_jev_compaction.stats import summarize


def fit_filled(messages: list[SessionMessage], archive: Path, fill: float = 60):
    """``messages`` compacted in a window they fill to ``fill`` %, as the plugin's trigger and
    ``fast-jev eval --prefix-fills`` hand it: the pin widened to the exchange in flight."""
    options = CompactOptions(
        archive_dir=str(archive), window_tokens=window_filled(messages, fill),
        preserve_recent_messages=in_flight_preserve(messages, CompactOptions().preserve_recent_messages),
    )
    return run_sync(compact_to_fit(messages, LocalJudge(), options), waits=False), options.window_tokens


def target_chars(window: int) -> float:
    return window * CHARS_PER_TOKEN * DEFAULT_TARGET_PERCENT / 100


def chars(messages: list[SessionMessage]) -> int:
    return sum(map(message_chars, messages))


def small_session() -> list[SessionMessage]:
    """A short task: one turn with a call, then the user's local commands (prompts the model never
    answered), and a last prompt: old prompts and an index line are most of what is left."""
    return [
        SessionMessage(role="user", text="start phoenix in background"),
        SessionMessage(role="assistant", text="Starting it.", toolUses=(ToolUse("toolu_1", "Bash", {"command": "mix phx.server &"}),)),
        SessionMessage(role="user", toolResults=(ToolResult("toolu_1", "[info] Running on http://localhost:4000\n" * 3),)),
        SessionMessage(role="assistant", text="It runs on port 4000."),
        SessionMessage(role="user", text="[Request interrupted by user]"),
        SessionMessage(role="user", text="<command-name>/mcp</command-name>\n<command-message>mcp</command-message>"),
        SessionMessage(role="user", text="<local-command-stdout>Reconnected to tidewave.</local-command-stdout>"),
        SessionMessage(role="user", text="scrolling back in xterm.js still does not work, can you look?"),
    ]


def test_a_tiny_window_s_context_ends_under_its_target_when_a_note_can_stand_for_its_past(tmp_path: Path) -> None:
    messages = small_session()
    # Half the window: the note names a file under pytest's folders, whose length varies by machine.
    result, window = fit_filled(messages, tmp_path, 50)
    # Reachable: the last prompt and one note for what precedes it fit the target...
    assert least_chars(result.messages, str(tmp_path)) <= target_chars(window)
    # ... and the ladder gets there: the conversation before the last prompt is one file, one note.
    assert result.stats.chars_after == chars(result.messages) <= target_chars(window)
    note, *rest = result.messages
    assert is_fold_note(note.text) and carries_mark(note.text) and note.role == "user"
    assert rest == messages[-1:] and rest[0] is messages[-1]  # the user's last prompt, whole
    path = saved_path(note.text)
    assert path is not None
    held = result.archive[path]
    assert all(m.text in held for m in messages[:-1] if is_prompt(m))
    # Every output it took is back through the note's file (and the files that one names).
    assert "Running on http://localhost:4000" in "".join(read_archived(Context.of(result.messages).marker_paths, result.archive))
    assert all(d.archive_path for d in result.decisions if d.action != "keep")
    old_prompts = sum(map(is_prompt, messages[:-1]))
    assert result.stats.prompts_folded == old_prompts
    assert f"the conversation before the turn in flight ({old_prompts} prompt(s)) moved to one file" in summarize(result.stats)
    assert turn_problems([m.to_wire() for m in regroup(result.messages)], messages) == []


def test_a_fold_that_frees_less_than_its_note_costs_is_not_taken(tmp_path: Path) -> None:
    """A past smaller than the note that would stand for it stays: the context ends over the
    target, which no cut that keeps a marker can reach (note-bound)."""
    messages = [
        SessionMessage(role="user", text="session A: create a task"),
        SessionMessage(role="assistant", toolUses=(ToolUse("toolu_a", "TaskCreate", {"n": 1}),)),
        SessionMessage(role="user", toolResults=(ToolResult("toolu_a", "task #1"),)),
        SessionMessage(role="user", text="session B: update it"),
    ]
    result, window = fit_filled(messages, tmp_path)
    assert least_chars(result.messages, str(tmp_path)) > target_chars(window)
    assert not any(is_fold_note(m.text) for m in result.messages)
    assert [m for m in result.messages if is_prompt(m)] == [m for m in messages if is_prompt(m)]
    # Nor by itself: fold_old_turns finds no end where it frees anything.
    assert fold_old_turns(messages, [], 0, 10**6, str(tmp_path)).turns == []


def test_a_fold_that_leaves_the_context_over_its_target_is_not_taken(tmp_path: Path) -> None:
    """The turn in flight alone over the target: folding the earlier prompts away would buy nothing."""
    messages = [*small_session()[:-1], SessionMessage(role="user", text="please look at this log:\n" + "step ok\n" * 400)]
    result, window = fit_filled(messages, tmp_path)
    assert chars(result.messages) > target_chars(window)
    assert not any(is_fold_note(m.text) for m in result.messages) and result.stats.prompts_folded == 0
    # fold_old_turns alone would have folded them.
    assert fold_old_turns(result.messages, [], 0, 10**6, str(tmp_path)).turns


def test_fold_old_turns_goes_oldest_first_only_as_far_as_the_need_and_ends_at_a_prompt(tmp_path: Path) -> None:
    messages = small_session()
    least = fold_old_turns(messages, [], 0, 1, str(tmp_path))
    every = fold_old_turns(messages, [], 0, 10**6, str(tmp_path))
    assert least.freed >= 1 and every.freed > least.freed
    for fold in (least, every):
        assert is_fold_note(fold.messages[0].text) and is_prompt(fold.messages[1])
        assert fold.messages[-1] is messages[-1] and fold.freed == chars(messages) - chars(fold.messages)
    assert len(least.messages) > len(every.messages) == 2
    # The pinned recent window stays out of it.
    assert fold_old_turns(messages, [], len(messages) - 1, 10**6, str(tmp_path)).turns == []


def test_a_later_fold_holds_the_earlier_one_s_conversation(tmp_path: Path) -> None:
    messages = small_session()
    first = fold_old_turns(messages, [], 0, 10**6, str(tmp_path))
    later = [*first.messages, SessionMessage(role="assistant", text="Looking."), SessionMessage(role="user", text="and now?")]
    saved = {**first.archive}
    again = fold_old_turns(later, [], 0, 10**6, str(tmp_path), saved.get)
    # The earlier note's prompts, and the prompt that was the last one then.
    assert again.turns and again.turns[0].folded == sum(map(is_prompt, messages))
    (text,) = again.archive.values()
    assert all(m.text in text for m in messages if is_prompt(m)) and "Looking." in text


def test_the_goal_is_the_user_s_words_not_the_fold_s_note(tmp_path: Path) -> None:
    from fast_jev_compaction.state.goal import goal_from_messages

    messages = small_session()
    fold = fold_old_turns(messages, [], 0, 10**6, str(tmp_path))
    assert is_fold_note(fold.messages[0].text)
    assert goal_from_messages(fold.messages) == goal_from_messages(messages[-1:])


def test_the_hook_sends_the_fold_s_note_and_the_last_prompt_whole(data_dir: Path) -> None:
    import json

    from fast_jev_compaction.hook.gate import unmeasured_tokens
    from test_hook_entry import event, run_hook

    messages = small_session()
    # A little more room than in the ladder's test: the note names a file under pytest's longer
    # folders (in so small a window, its path's length decides whether a fold can reach the target).
    window = window_filled(messages, 50)
    measured = int(chars(messages) / CHARS_PER_TOKEN) - unmeasured_tokens(messages)
    context = {"tokens": measured, "window": window, "percent": 100 * measured / window}
    answer, _ = run_hook(json.dumps(event([m.to_wire() for m in messages], data_dir, context=context)).encode(), data_dir)
    assert answer["action"] == "replace", answer.get("reason")
    assert "the conversation before the turn in flight moved" in answer["toast"]
    texts = [m.get("text", "") for m in answer["messages"]]
    (note,) = [text for text in texts if is_fold_note(text)]
    assert texts[-1] == messages[-1].text
    held = Path(str(saved_path(note))).read_text(encoding="utf-8")
    assert all(m.text in held for m in messages[:-1] if is_prompt(m))


def test_when_a_rule_keeps_the_exchange_in_flight_whole_the_fold_follows_its_cut(tmp_path: Path) -> None:
    """The trailing exchange's failing run is more than the context is over its target, so the
    fold waits for that output's cut; but an error not yet fixed stays whole (rule open-error),
    and the fold then brings the context under its target after all."""
    failure = "".join(f"tests/test_app.py::test_case_{n} FAILED: expected {n}, got {n + 1}\n" for n in range(60))
    messages = [
        *small_session()[:-1],
        SessionMessage(role="user", text="why does the check fail?"),
        SessionMessage(role="assistant", text="Reading its log.", toolUses=(ToolUse("toolu_t", "Bash", {"command": "tail -n 60 logs/check.log"}),)),
        SessionMessage(role="user", toolResults=(ToolResult("toolu_t", failure, isError=True),)),
    ]
    # A target a little over what the turn in flight and one note take: the context is over it by
    # less than the failing run's length, and by more than the aim's margin leaves.
    window = round((least_chars(messages, str(tmp_path)) + 150) / CHARS_PER_TOKEN / (DEFAULT_TARGET_PERCENT / 100))
    assert chars(messages) > target_chars(window)
    options = CompactOptions(archive_dir=str(tmp_path), window_tokens=window, preserve_recent_messages=3)
    result = run_sync(compact_to_fit(messages, LocalJudge(), options), waits=False)
    (run,) = [d for d in result.decisions if d.tool_use_id == "toolu_t"]
    assert run.action == "keep"
    assert result.messages[-1] is messages[-1]  # the failure, whole
    assert is_fold_note(result.messages[0].text) and result.stats.prompts_folded == sum(map(is_prompt, messages[:-3]))
    assert result.stats.chars_after == chars(result.messages) <= target_chars(window)
    assert turn_problems([m.to_wire() for m in regroup(result.messages)], messages) == []
    # The same output, not an error: its cut alone reaches the target, and the past stays in view.
    passing = [*messages[:-1], SessionMessage(role="user", toolResults=(ToolResult("toolu_t", failure),))]
    cut = run_sync(compact_to_fit(passing, LocalJudge(), options), waits=False)
    assert [d.action != "keep" for d in cut.decisions if d.tool_use_id == "toolu_t"] == [True]
    assert not any(is_fold_note(m.text) for m in cut.messages) and cut.stats.chars_after <= target_chars(window)
