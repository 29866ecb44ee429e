"""Applying decisions to the transcript: digests for truncated outputs, a marker line for every
dropped call, identity for everything untouched, and a pinned call that no forged decision moves."""

from __future__ import annotations

import dataclasses

from fast_jev_compaction.conversation.messages import NO_EXTRA, SessionMessage
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.decide.decisions import DROP, KEEP, TRUNCATE, CallDecision, decide_call
from fast_jev_compaction.decide.digest import DigestShape
from fast_jev_compaction.decide.markers import carries_mark, saved_path
from fast_jev_compaction.decide.rebuild import MIN_SAVING, apply_decisions, cut_output
from scripted_asker import assistant, dump, result, results, use, user

SHAPE = DigestShape(budget=1600, head=500)
ARCHIVE = "/data/archive/feedface.txt"


def rebuild(messages, actions, preserve=1, archive=ARCHIVE, shape=SHAPE):
    """Give every call the action ``actions[tool_use_id]`` (default keep)."""
    calls = pair_tool_calls(messages, preserve).calls
    decisions = [
        CallDecision(c.id, c.tool_use_id, c.tool, 0.0, 0.0, actions.get(c.tool_use_id, KEEP), "test", 0, archive)
        for c in calls
    ]
    return apply_decisions(messages, decisions, calls, shape)


def log_output(lines=3000):
    return "\n".join(f"row {n:05d} of the listing" for n in range(lines)) + "\nFAILED tests/test_x.py::test_y\n" + "\n".join(
        f"tail {n}" for n in range(40)
    ) + "\n=== 1 failed, 99 passed in 3.2s ==="


def fixture(output=None, is_error=None, **extra):
    output = log_output() if output is None else output
    return [
        user("go"),
        assistant("Reading it.", use("a", "Read", text=output, is_error=is_error, file_path="src/a.ts"), handle="h-call"),
        results(result("a", output, is_error), handle="h-result", **extra),
        assistant("after"),
        user("end"),
    ]


class TestCutOutput:
    def test_digest_keeps_head_tail_and_key_lines_then_the_note(self):
        text = log_output()
        cut = cut_output(text, False, SHAPE, ARCHIVE)
        assert cut is not None and len(cut) < SHAPE.budget + 400
        assert cut.startswith("row 00000 of the listing\n")
        assert "FAILED tests/test_x.py::test_y" in cut  # a key line from the middle
        assert "=== 1 failed, 99 passed in 3.2s ===" in cut  # the closing line
        assert "[… " in cut and " chars …]" in cut
        assert cut.endswith(f"the full output is saved at {ARCHIVE}; Read it if needed]")
        assert f"of {len(text):,} chars of this output" in cut

    def test_every_kept_piece_is_a_verbatim_slice(self):
        text = log_output()
        cut = cut_output(text, False, SHAPE, ARCHIVE)
        assert cut is not None
        for line in cut.splitlines()[:-1]:
            if not line.startswith("[… "):
                assert line in text

    def test_short_outputs_are_not_worth_cutting(self):
        assert cut_output("x" * (SHAPE.budget + MIN_SAVING), False, SHAPE, ARCHIVE) is None
        assert cut_output("x" * 10_000, False, SHAPE, ARCHIVE) is not None

    def test_a_cut_always_frees_at_least_the_minimum(self):
        for size in range(1900, 2600, 37):
            cut = cut_output("y" * size, False, SHAPE, ARCHIVE)
            assert cut is None or size - len(cut) >= MIN_SAVING

    def test_error_outputs_say_so(self):
        cut = cut_output("E" * 5000, True, SHAPE, None)
        assert cut is not None and "of this error output" in cut and cut.endswith("re-run the tool if needed]")

    def test_no_cut_inside_a_surrogate_pair(self):
        # Text decoded leniently can hold a pair as two code points; a cut never separates them.
        text = ("a" * 499 + "\ud83d\ude00") * 20
        cut = cut_output(text, False, DigestShape(budget=1600, head=500), None)
        assert cut is not None
        for index, char in enumerate(cut):
            if "\ud800" <= char <= "\udbff":
                assert index + 1 < len(cut) and "\udc00" <= cut[index + 1] <= "\udfff"

    def test_head_zero_keeps_no_opening(self):
        cut = cut_output("k" * 5000, False, DigestShape(budget=1600, head=0), None)
        assert cut is not None and not cut.startswith("k")


class TestApplyDecisions:
    def test_drop_leaves_a_marker_line_in_the_calling_message(self):
        messages = fixture()
        before = dump(messages)
        out = rebuild(messages, {"a": DROP})
        assert [m.text.split("\n")[0] for m in out] == ["go", "Reading it.", "after", "end"]
        marker = out[1].text.split("\n")[1]
        assert marker.startswith("[fast-jev-compaction: the Read call (src/a.ts) ran here;")
        assert saved_path(marker) == ARCHIVE and carries_mark(marker)
        assert out[1].toolUses == () and out[1].handle is None
        assert out[0] is messages[0] and out[2] is messages[3] and out[3] is messages[4]
        assert dump(messages) == before

    def test_a_rebuilt_message_without_calls_or_extras_holds_the_shared_empties(self):
        out = rebuild(fixture(), {"a": DROP})
        # One per message would be 0.1x a long session's size in memory.
        assert type(out[1].toolUses) is tuple and not out[1].toolUses and out[1].extra is NO_EXTRA

    def test_a_call_only_message_becomes_its_marker(self):
        messages = [user("go"), assistant("", use("a", "Read", file_path="f")), results(result("a", "r" * 3000)), user("end")]
        out = rebuild(messages, {"a": DROP})
        assert len(out) == 3 and out[1].role == "assistant" and out[1].text.startswith("[fast-jev-compaction: the Read call (f)")

    def test_truncate_cuts_both_copies_to_the_same_digest(self):
        messages = fixture()
        out = rebuild(messages, {"a": TRUNCATE})
        assert len(out) == 5
        assert out[1].toolUses[0].text == out[2].toolResults[0].text
        assert out[2].toolResults[0].text == cut_output(log_output(), False, SHAPE, ARCHIVE)
        assert out[1].toolUses[0].input == {"file_path": "src/a.ts"}
        assert out[1].text == "Reading it."
        for k in (0, 3, 4):
            assert out[k] is messages[k]

    def test_short_results_stay_identical_when_truncated(self):
        messages = fixture("s" * 100)
        out = rebuild(messages, {"a": TRUNCATE})
        assert len(out) == len(messages) and all(a is b for a, b in zip(out, messages))

    def test_keep_leaves_everything_identical(self):
        messages = fixture()
        assert all(a is b for a, b in zip(rebuild(messages, {}), messages))

    def test_error_flags_on_rebuilt_blocks(self):
        out = rebuild(fixture("E" * 9000, is_error=True), {"a": TRUNCATE})
        assert out[1].toolUses[0].isError is True and out[2].toolResults[0].isError is True
        plain = rebuild(fixture("E" * 9000), {"a": TRUNCATE})
        assert plain[1].toolUses[0].isError is None  # set only when the original had it
        assert plain[2].toolResults[0].isError is False

    def test_rebuilt_messages_keep_extras_but_not_record_ids(self):
        blocks = [{"type": "image", "source": "s"}]
        messages = fixture(extraBlocks=blocks, uuid="u-1", isSidechain=False)
        out = rebuild(messages, {"a": TRUNCATE})
        extra = out[2].extra
        assert extra["extraBlocks"] == blocks and extra["isSidechain"] is False
        assert "uuid" not in extra and out[2].handle is None
        assert messages[2].handle == "h-result" and messages[2].extra["uuid"] == "u-1"

    def test_texts_survive_and_each_drop_gets_its_own_line(self):
        messages = [
            user("go"),
            assistant("I will read them", use("a", "Read", file_path="f"), use("b", "Read", file_path="g")),
            results(result("a", "A" * 5000), result("b", "B" * 5000), text="here you go"),
            user("end"),
        ]
        out = rebuild(messages, {"a": DROP})
        assert out[1].text.split("\n")[0] == "I will read them" and "the Read call (f)" in out[1].text
        assert [u.tool_use_id for u in out[1].toolUses] == ["b"] and out[1].toolUses[0] is messages[1].toolUses[1]
        assert out[2].text == "here you go" and [r.tool_use_id for r in out[2].toolResults] == ["b"]

        both = rebuild(messages, {"a": DROP, "b": DROP})
        assert both[1].text.split("\n") == [
            "I will read them",
            *[line for line in both[1].text.split("\n")[1:] if line.startswith("[fast-jev-compaction: the Read call")],
        ]
        assert len(both[1].text.split("\n")) == 3
        assert both[1].toolUses == () and both[2].toolResults is None and both[2].text == "here you go"

    def test_forged_drop_on_a_pinned_call_is_ignored(self):
        messages = fixture()
        calls = pair_tool_calls(messages, 3).calls
        assert calls[0].pinned
        forged = decide_call(dataclasses.replace(calls[0], pinned=False), (0, 0), 0.5)
        assert forged.action == DROP
        out = apply_decisions(messages, [forged], calls, SHAPE)
        assert all(a is b for a, b in zip(out, messages)) and len(out) == len(messages)

    def test_orphan_results_are_left_alone(self):
        messages = [
            user("go"),
            assistant("", use("a", "Read", file_path="f")),
            results(result("a", "r" * 6000), result("ghost", "G" * 600)),
            user("end"),
        ]
        out = rebuild(messages, {"a": DROP})
        assert [r.tool_use_id for r in out[2].toolResults] == ["ghost"]
        assert out[2].toolResults[0] is messages[2].toolResults[1]

    def test_input_is_not_mutated(self):
        messages = fixture()
        before = dump(messages)
        for action in (TRUNCATE, DROP):
            rebuild(messages, {"a": action})
        assert dump(messages) == before
        assert isinstance(messages[2], SessionMessage)
