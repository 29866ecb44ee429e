"""Applying decisions to the transcript (upstream §6.3-6.4, §8.1 "applyDecisions" and
"truncateHeadChars", regression 03's forged-decision case)."""

from __future__ import annotations

import dataclasses

from fast_jev_compaction.decisions import decide_call
from fast_jev_compaction.messages import SessionMessage
from fast_jev_compaction.pairing import pair_tool_calls
from fast_jev_compaction.rebuild import apply_decisions, truncated_result_text
from scripted_asker import assistant, dump, result, results, use, user

ANSWERS = {"keep": (1, 1), "drop_result": (1, 0), "drop_call": (0, 0)}
NOTE_TAIL = " chars of this tool result; re-run the tool if needed]"


def rebuild(messages, actions, preserve=1, head=300, archive=None):
    """Decide every call with an answer that forces ``actions[tool_use_id]`` (default keep)."""
    calls = pair_tool_calls(messages, preserve).calls
    decisions = [decide_call(c, ANSWERS[actions.get(c.tool_use_id, "keep")], 0.5) for c in calls]
    return apply_decisions(messages, decisions, calls, head, archive)


def fixture(output="x" * 2000, is_error=None, **extra):
    return [
        user("go"),
        assistant("", use("a", "Read", text=output, is_error=is_error, file_path="src/a.ts"), handle="h-call"),
        results(result("a", output, is_error), handle="h-result", **extra),
        assistant("after"),
        user("end"),
    ]


class TestTruncatedResultText:
    def test_long_result_keeps_its_head(self):
        text = truncated_result_text("x" * 2000, False, 300)
        assert text == "x" * 300 + "\n[fast-jev-compaction truncated 1700" + NOTE_TAIL

    def test_head_zero_leaves_only_the_note_with_the_full_length(self):
        assert truncated_result_text("y" * 500, False, 0) == "[fast-jev-compaction truncated 500" + NOTE_TAIL

    def test_error_is_marked(self):
        text = truncated_result_text("e" * 1000, True, 10)
        assert text == "e" * 10 + "\n[fast-jev-compaction truncated 990 chars of this tool result (error); re-run the tool if needed]"

    def test_margin_of_120(self):
        assert truncated_result_text("z" * 420, False, 300) == "z" * 420
        cut = truncated_result_text("z" * 421, False, 300)
        assert cut != "z" * 421 and len(cut) < 421

    def test_archive_note_points_at_the_file(self):
        text = truncated_result_text("q" * 3000, False, 5, ".claude/r-a.txt")
        assert text == "q" * 5 + "\n[fast-jev-compaction truncated 2995 chars of this tool result; the full output is saved at .claude/r-a.txt; Read it if needed]"

    def test_a_long_archive_path_never_makes_a_result_longer(self):
        path = ".claude/fast-jev-compaction/result-toolu_01ABCDEFGHIJKLMNOPQRSTUV.txt"
        for size in (421, 460, 500):
            assert len(truncated_result_text("w" * size, False, 300, path)) <= size
        assert truncated_result_text("w" * 421, False, 300, path) == "w" * 421  # the cut would grow it
        assert len(truncated_result_text("w" * 5000, False, 300, path)) < 5000

    def test_lengths_are_code_points(self):
        """Deliberate difference (a): the head is 3 code points, so no emoji is cut in half."""
        text = truncated_result_text("\U0001F600" * 200, False, 3)
        assert text.startswith("\U0001F600" * 3 + "\n[fast-jev-compaction truncated 197 chars")


class TestApplyDecisions:
    def test_drop_call_removes_both_sides(self):
        messages = fixture()
        before = dump(messages)
        out = rebuild(messages, {"a": "drop_call"})
        assert out == [messages[0], messages[3], messages[4]]
        assert all(a is b for a, b in zip(out, [messages[0], messages[3], messages[4]]))
        assert dump(messages) == before

    def test_drop_result_truncates_both_copies(self):
        messages = fixture()
        out = rebuild(messages, {"a": "drop_result"})
        expected = "x" * 300 + "\n[fast-jev-compaction truncated 1700" + NOTE_TAIL
        assert len(out) == 5
        assert out[1].toolUses[0].text == expected
        assert out[2].toolResults[0].text == expected
        assert out[1].toolUses[0].input == {"file_path": "src/a.ts"}
        assert out[1] is not messages[1] and out[2] is not messages[2]
        for k in (0, 3, 4):
            assert out[k] is messages[k]

    def test_head_50(self):
        output = "0123456789" * 30
        out = rebuild(fixture(output), {"a": "drop_result"}, head=50)
        expected = output[:50] + f"\n[fast-jev-compaction truncated {len(output) - 50}" + NOTE_TAIL
        assert out[2].toolResults[0].text == expected
        assert out[1].toolUses[0].text == out[2].toolResults[0].text

    def test_head_0(self):
        out = rebuild(fixture("k" * 700), {"a": "drop_result"}, head=0)
        assert out[2].toolResults[0].text == "[fast-jev-compaction truncated 700" + NOTE_TAIL
        assert out[1].toolUses[0].text == out[2].toolResults[0].text

    def test_short_results_stay_identical(self):
        messages = fixture("s" * 100)
        out = rebuild(messages, {"a": "drop_result"})
        assert len(out) == len(messages) and all(a is b for a, b in zip(out, messages))

    def test_keep_leaves_everything_identical(self):
        messages = fixture()
        assert all(a is b for a, b in zip(rebuild(messages, {}), messages))

    def test_error_flags_on_rebuilt_blocks(self):
        out = rebuild(fixture("E" * 900, is_error=True), {"a": "drop_result"})
        assert out[1].toolUses[0].isError is True
        assert out[2].toolResults[0].isError is True
        assert "(error); re-run the tool if needed]" in out[2].toolResults[0].text
        plain = rebuild(fixture("E" * 900), {"a": "drop_result"})
        assert plain[1].toolUses[0].isError is None  # set only when the original had it
        assert plain[2].toolResults[0].isError is False

    def test_use_without_result_copy_keeps_its_message(self):
        messages = [
            user("go"),
            assistant("", use("a", "Read", file_path="f")),  # no text copy on the ToolUse
            results(result("a", "r" * 1000)),
            user("end"),
        ]
        out = rebuild(messages, {"a": "drop_result"})
        assert out[1] is messages[1]
        assert out[2] is not messages[2] and out[2].toolResults[0].text.startswith("r" * 300 + "\n[")

    def test_rebuilt_messages_keep_extras_but_not_record_ids(self):
        """Deliberate difference (e): upstream rebuilt messages from role/text/tool blocks only,
        losing other blocks; we carry extras like ``extraBlocks`` but not ``handle``/``uuid``."""
        blocks = [{"type": "image", "source": "s"}]
        messages = fixture(extraBlocks=blocks, uuid="u-1", isSidechain=False)
        out = rebuild(messages, {"a": "drop_result"})
        extra = out[2].model_extra
        assert extra["extraBlocks"] == blocks and extra["isSidechain"] is False
        assert "uuid" not in extra and out[2].handle is None
        assert out[1].handle is None
        assert messages[2].handle == "h-result" and messages[2].model_extra["uuid"] == "u-1"

    def test_texts_survive_a_drop_call(self):
        messages = [
            user("go"),
            assistant("I will read it", use("a", "Read", file_path="f"), use("b", "Read", file_path="g")),
            results(result("a", "A" * 50), result("b", "B" * 50), text="here you go"),
            user("end"),
        ]
        out = rebuild(messages, {"a": "drop_call"})
        assert [m.text for m in out] == ["go", "I will read it", "here you go", "end"]
        assert [u.tool_use_id for u in out[1].toolUses] == ["b"]
        assert out[1].toolUses[0] is messages[1].toolUses[1]
        assert [r.tool_use_id for r in out[2].toolResults] == ["b"]
        assert out[2].toolResults[0] is messages[2].toolResults[1]

        both = rebuild(messages, {"a": "drop_call", "b": "drop_call"})
        assert [m.text for m in both] == ["go", "I will read it", "here you go", "end"]
        assert both[1].toolUses == [] and both[2].toolResults is None

    def test_blank_message_left_empty_is_removed(self):
        messages = [user("go"), assistant("  \n", use("a", "Read", file_path="f")), results(result("a", "r")), user("end")]
        assert rebuild(messages, {"a": "drop_call"}) == [messages[0], messages[3]]

    def test_forged_drop_on_a_pinned_call_is_ignored(self):
        messages = fixture()
        calls = pair_tool_calls(messages, 3).calls
        assert calls[0].pinned
        forged = decide_call(dataclasses.replace(calls[0], pinned=False), (0, 0), 0.5)
        assert forged.action == "drop_call"
        out = apply_decisions(messages, [forged], calls, 300)
        assert all(a is b for a, b in zip(out, messages)) and len(out) == len(messages)

    def test_orphan_results_are_left_alone(self):
        messages = [
            user("go"),
            assistant("", use("a", "Read", file_path="f")),
            results(result("a", "r" * 600), result("ghost", "G" * 600)),
            user("end"),
        ]
        out = rebuild(messages, {"a": "drop_call"})
        assert [r.tool_use_id for r in out[1].toolResults] == ["ghost"]
        assert out[1].toolResults[0] is messages[2].toolResults[1]

    def test_input_is_not_mutated(self):
        messages = fixture()
        before = dump(messages)
        for action in ("drop_result", "drop_call"):
            rebuild(messages, {"a": action})
        assert dump(messages) == before
        assert isinstance(messages[2], SessionMessage)
