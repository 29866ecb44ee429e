"""A last prompt that is a ``!`` command's output (``turn_eviction.cut_command_output``): Claude
Code records it as a user message of its own, a prompt by its shape but the command's words.
When it cannot fit the context's aim whatever else leaves, it is cut first, as a tool's output
is (digest and note, saved whole), and the ladder frees only what is left of the need. The user's own last prompt stays whole."""

from __future__ import annotations

import json
from pathlib import Path

from fast_jev_compaction.conversation.messages import SessionMessage
from fast_jev_compaction.conversation.sizes import message_chars
from fast_jev_compaction.decide.markers import carries_mark, saved_path, truncation_note
from fast_jev_compaction.decide.policy import CHARS_PER_TOKEN, TARGET_MARGIN_POINTS
from fast_jev_compaction.decide.turn_eviction import is_command_output, is_prompt
from fast_jev_compaction.hook.answer import toast_text
from fast_jev_compaction.stats import summarize
from test_hook_entry import event, run_hook
from test_turn_eviction import TURNS, assert_whole, fit, index_lines, reply, session, window_needing

RUN_LINES = 1_200


def test_run(lines: int = RUN_LINES) -> str:
    """A test run printed with ``!``, as Claude Code records it: its failure near the end."""
    body = "\n".join(f"tests/test_mod.py::test_case_{n} PASSED" for n in range(lines))
    return (
        f"<bash-stdout>{body}\ntests/test_mod.py::test_parser FAILED\nE   AssertionError: expected 3, got 4\n"
        f"==== 1 failed, {lines} passed in 9.81s ====</bash-stdout><bash-stderr></bash-stderr>"
    )


test_run.__test__ = False  # type: ignore[attr-defined]  # a builder, not a test


def with_run(output: str) -> list[SessionMessage]:
    return [
        *session(),
        SessionMessage(role="user", text="<bash-input>pytest tests/test_mod.py</bash-input>"),
        SessionMessage(role="user", text=output),
    ]


def aim_chars(window: int) -> float:
    return window * (40 - TARGET_MARGIN_POINTS) / 100 * CHARS_PER_TOKEN


def test_a_command_output_larger_than_the_aim_is_cut_first_and_the_rest_of_the_ladder_frees_only_the_rest(
    tmp_path: Path,
) -> None:
    output = test_run()
    messages = with_run(output)
    # A window whose aim holds the turns but not the run: every old turn would have to go, and
    # the run would still not fit.
    window = int((message_chars(messages[-2]) + 3 * sum(map(message_chars, messages[:8]))) / (0.38 * CHARS_PER_TOKEN))
    assert len(output) > aim_chars(window)
    result = fit(messages, tmp_path, window)

    last = result.messages[-1]
    assert is_prompt(last) and last.text != output and carries_mark(last.text)
    path = saved_path(last.text)
    assert path is not None and result.archive[path] == output
    # Its digest keeps the opening, the closing (the failure and the tally) and says what it kept.
    assert is_command_output(last) and last.text.startswith("<bash-stdout>")
    assert "AssertionError: expected 3, got 4" in last.text and f"1 failed, {RUN_LINES} passed" in last.text
    kept = int(last.text.rsplit("kept ", 1)[1].split(" of ", 1)[0].replace(",", ""))
    assert last.text.endswith(truncation_note(len(output) - len("<bash-stdout>"), kept, False, path))
    assert last.handle is None and "uuid" not in last.extra
    # The command the user typed stays as it was, and so do the newer turns the cut made room for.
    assert result.messages[-2] is messages[-2]
    assert reply(TURNS - 1) in [m.text for m in result.messages]
    assert len(index_lines(result.messages)) < TURNS - 1
    assert result.stats.command_output_cut and result.stats.chars_before == sum(map(message_chars, messages))
    assert result.stats.chars_after == sum(map(message_chars, result.messages))
    assert result.stats.chars_after / CHARS_PER_TOKEN <= 0.40 * window
    assert "; the command output that ends it cut to a digest, saved whole" in summarize(result.stats)
    assert "the command output that ends it cut to a digest" in toast_text(result.stats, "under the target")
    assert_whole([*messages[:-1], last], result.messages)


def test_a_command_output_the_aim_holds_only_with_nothing_before_it_is_cut_first_too(tmp_path: Path) -> None:
    """Its own size fits the aim, but not beside the one note that would stand for everything
    before it: no rung can make it fit whole, so it is cut before any turn leaves for nothing."""
    output = test_run()
    messages = with_run(output)
    window = int((len(output) + 80) / ((40 - TARGET_MARGIN_POINTS) / 100 * CHARS_PER_TOKEN))
    result = fit(messages, tmp_path, window)
    path = saved_path(result.messages[-1].text)
    assert path is not None and result.archive[path] == output and result.stats.command_output_cut
    assert result.stats.evicted_turns + result.stats.prompts_folded < TURNS
    assert reply(TURNS - 1) in [m.text for m in result.messages]

    # With room for it beside what the ladder leaves of the rest, it stays whole.
    roomy = fit(messages, tmp_path, int(1.5 * window))
    assert roomy.messages[-1] is messages[-1] and not roomy.stats.command_output_cut
    assert roomy.stats.chars_after / CHARS_PER_TOKEN <= 0.40 * int(1.5 * window)


def test_the_users_own_last_prompt_stays_whole_however_long(tmp_path: Path) -> None:
    pasted = "Please fix this log:\n" + test_run().removeprefix("<bash-stdout>")
    messages = [*session(), SessionMessage(role="user", text=pasted)]
    assert not is_command_output(messages[-1]) and is_command_output(with_run(test_run())[-1])
    result = fit(messages, tmp_path, window_needing(messages, 0.9 * sum(map(message_chars, messages))))
    assert result.messages[-1] is messages[-1] and not result.stats.command_output_cut


def test_the_hook_answers_with_the_run_cut_and_saved_whole(data_dir: Path) -> None:
    output = test_run()
    messages = [m.to_wire() for m in with_run(output)]
    tokens = round(sum(map(message_chars, with_run(output))) / CHARS_PER_TOKEN)
    doc = event(messages, data_dir, context={"tokens": tokens, "window": round(tokens * 0.9)})
    answer, _ = run_hook(json.dumps(doc).encode(), data_dir)
    assert answer["action"] == "replace", answer
    last = answer["messages"][-1]
    path = saved_path(last["text"])
    assert path is not None and Path(path).read_text(encoding="utf-8") == output
    assert "AssertionError: expected 3, got 4" in last["text"] and len(last["text"]) < len(output) // 4
    assert "the command output that ends it cut to a digest" in answer["toast"]
