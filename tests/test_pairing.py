"""Pairing and pinning (upstream §1.2-1.3, §8.1 "pairing", regression 03's pairing side)."""

from __future__ import annotations

import pytest

from fast_jev_compaction.conversation.pairing import collect_tool_calls, is_pinned, pair_tool_calls, pinned_positions
from fast_jev_compaction.errors import PairingError
from scripted_asker import FILE_A, assistant, call, result, results, ten_messages, use, user


def test_ten_message_fixture_pairs_and_pins():
    calls = collect_tool_calls(ten_messages(), 3)
    summary = [(c.id, c.tool, c.call_index, c.result_index, c.pinned) for c in calls]
    assert summary == [
        ("t1", "Read", 1, 2, False),
        ("t2", "Read", 4, 5, False),
        ("t3", "Bash", 6, 7, True),
    ]
    assert calls[2].is_error is True
    assert calls[0].is_error is False
    assert calls[0].result_chars == len(FILE_A)
    assert calls[0].input == {"file_path": "src/a.ts"}
    assert calls[0].tool_use_id == "toolu_a"


def test_call_without_result_is_not_a_call_and_does_not_take_a_number():
    messages = [
        user("go"),
        assistant("", use("pending", "Read", file_path="a")),
        call("done", "Read", file_path="b"),
        results(result("done", "ok")),
        user("end"),
    ]
    pairing = pair_tool_calls(messages, 0)
    assert [(c.id, c.tool_use_id) for c in pairing.calls] == [("t1", "done")]
    assert [(p.tool_use_id, p.call_index, p.input) for p in pairing.pending] == [("pending", 1, {"file_path": "a"})]
    assert collect_tool_calls(messages, 0) == pairing.calls


def test_orphan_result_is_ignored():
    messages = [user("go"), results(result("ghost", "boo")), call("a"), results(result("a", "ok")), user("end")]
    pairing = pair_tool_calls(messages, 0)
    assert [c.tool_use_id for c in pairing.calls] == ["a"]
    assert pairing.orphan_results == ["ghost"]


def test_result_far_from_its_call_is_paired_and_block_order_numbers_calls():
    messages = [
        user("go"),
        assistant("", use("x", "Grep", pattern="p"), use("y", "Glob", pattern="*.ts")),
        user("meanwhile"),
        # Results arrive in the other order and much later; numbering follows the calls.
        results(result("y", "yy")),
        assistant("thinking"),
        results(result("x", "xxx")),
        user("end"),
    ]
    calls = collect_tool_calls(messages, 0)
    assert [(c.id, c.tool_use_id, c.call_index, c.result_index, c.result_chars) for c in calls] == [
        ("t1", "x", 1, 5, 3),
        ("t2", "y", 1, 3, 2),
    ]


def test_result_chars_counts_code_points():
    """Deliberate difference (a): an emoji counts 1 here, where upstream's JS .length counts 2."""
    messages = [user("go"), call("e"), results(result("e", "ok \U0001F600")), user("end")]
    assert collect_tool_calls(messages, 0)[0].result_chars == 4


@pytest.mark.parametrize(
    "index, total, preserve, pinned",
    [
        (0, 10, 0, True),  # the first message whatever the option
        (1, 10, 0, False),
        (9, 10, 0, False),  # preserve 0 pins only the first message
        (6, 10, 3, False),
        (7, 10, 3, True),
        (0, 1, 0, True),
        (3, 4, 100, True),
    ],
)
def test_is_pinned(index, total, preserve, pinned):
    assert is_pinned(index, total, preserve) is pinned


@pytest.mark.parametrize("total", [0, 1, 2, 5, 12])
@pytest.mark.parametrize("preserve", [-1, 0, 1, 3, 11, 100])
def test_pinned_positions_are_those_is_pinned_holds_for(total, preserve):
    assert pinned_positions(total, preserve) == [i for i in range(total) if is_pinned(i, total, preserve)]


def test_result_inside_window_pins_a_call_before_it():
    messages = [user("go"), user("a"), call("c"), user("b"), results(result("c", "ok"))]
    # Window of 1: only index 4 (the result) is recent, yet the call at index 2 is pinned.
    assert collect_tool_calls(messages, 1)[0].pinned is True
    assert collect_tool_calls(messages, 0)[0].pinned is False


def test_call_in_first_message_is_pinned():
    messages = [assistant("", use("c")), results(result("c", "ok")), user("x"), user("y")]
    assert collect_tool_calls(messages, 0)[0].pinned is True


def test_candidates_are_the_unpinned_calls():
    pairing = pair_tool_calls(ten_messages(), 3)
    assert [c.id for c in pairing.candidates] == ["t1", "t2"]


class TestIntegrity:
    """Regression 03 (hardening): structures that could make a drop unsafe are rejected."""

    def test_duplicate_tool_use_id(self):
        messages = [user("go"), call("d"), results(result("d", "1")), call("d"), user("end")]
        with pytest.raises(PairingError, match="Duplicate tool_use_id: d"):
            pair_tool_calls(messages, 0)

    def test_duplicate_tool_result(self):
        messages = [user("go"), call("d"), results(result("d", "1")), results(result("d", "2")), user("end")]
        with pytest.raises(PairingError, match="Duplicate tool_result: d"):
            pair_tool_calls(messages, 0)

    def test_duplicate_in_one_message(self):
        messages = [user("go"), assistant("", use("d"), use("d")), user("end")]
        with pytest.raises(PairingError, match="Duplicate tool_use_id: d"):
            pair_tool_calls(messages, 0)

    def test_result_before_its_call(self):
        messages = [user("go"), results(result("r", "1")), call("r"), user("end")]
        with pytest.raises(PairingError, match="Tool result precedes its call: r"):
            pair_tool_calls(messages, 0)

    def test_pending_and_orphan_together_are_fine(self):
        pairing = pair_tool_calls([call("pending"), results(result("orphan", "x"))], 0)
        assert pairing.calls == [] and pairing.candidates == []
        assert [p.tool_use_id for p in pairing.pending] == ["pending"]
        assert pairing.orphan_results == ["orphan"]

    def test_pairing_error_is_a_value_error(self):
        # Callers that only know ValueError still catch it.
        assert issubclass(PairingError, ValueError)
