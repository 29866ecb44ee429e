"""A compaction's sizes: each input measured once, and the rebuild measuring only what it changed,
count what ``message_chars`` counts over every message."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fast_jev_compaction.compaction import compact_sync, shape_of
from fast_jev_compaction.conversation.lexicon import call_target
from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.conversation.sizes import input_chars, measured, message_chars
from fast_jev_compaction.conversation.transcript import parse_transcript
from fast_jev_compaction.decide.decisions import DROP, KEEP, TRUNCATE, CallDecision
from fast_jev_compaction.decide.digest import DigestShape
from fast_jev_compaction.decide.markers import drop_marker
from fast_jev_compaction.decide.rebuild import apply_decisions, rebuild
from fast_jev_compaction.evaluation.synthetic import transcript_lines
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.options import CompactOptions

SHAPE = DigestShape(budget=300, head=100, ids=20)
_TEXT = st.text(st.sampled_from('ab "\\\n\u00e9'), max_size=8)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[SessionMessage], list[CallDecision]]:
    """Assistant turns of up to three calls (some never answered), each answered by a user turn
    of results; a decision per answered call."""
    messages: list[SessionMessage] = [SessionMessage(role="user", text=draw(_TEXT))]
    decisions: list[CallDecision] = []
    for turn in range(draw(st.integers(0, 4))):
        uses = []
        results = []
        for k in range(draw(st.integers(1, 3))):
            tool_use_id = f"u{turn}.{k}"
            value = draw(st.dictionaries(st.sampled_from(["file_path", "command", "n"]), _TEXT | st.integers(), max_size=2))
            uses.append(ToolUse(tool_use_id=tool_use_id, tool="Bash", input=value))
            if draw(st.booleans()):
                results.append(ToolResult(tool_use_id=tool_use_id, text=draw(st.sampled_from(["", "ok", "x" * 900]))))
                action = draw(st.sampled_from([KEEP, TRUNCATE, DROP]))
                decisions.append(CallDecision("", tool_use_id, "Bash", 0.0, 0.0, action, "threshold"))
        messages.append(SessionMessage(role="assistant", text=draw(_TEXT), toolUses=tuple(uses)))
        if results:
            messages.append(SessionMessage(role="user", text=draw(st.sampled_from(["", " ", "t"])), toolResults=tuple(results)))
    return messages, decisions


@settings(max_examples=100, deadline=None)
@given(conversations())
def test_measured_sizes_and_the_rebuilds_count_are_message_chars(case: tuple[list[SessionMessage], list[CallDecision]]) -> None:
    messages, decisions = case
    calls = pair_tool_calls(messages, 0).calls
    sizes, inputs = measured(messages, calls)
    assert list(sizes) == [message_chars(m) for m in messages]
    assert list(inputs) == [input_chars(call.input) for call in calls]
    out, taken = rebuild(messages, decisions, calls, SHAPE, None, sizes)
    assert sum(sizes) - taken == sum(map(message_chars, out))
    assert rebuild(messages, decisions, calls, SHAPE)[1] == 0  # nothing counted without sizes


def test_a_compaction_counts_what_it_returns() -> None:
    messages = parse_transcript(list(transcript_lines(600)))
    result = compact_sync(messages, LocalJudge())
    assert result.stats.truncated + result.stats.dropped > 0
    assert result.stats.chars_after == sum(map(message_chars, result.messages))
    assert result.stats.chars_after < result.stats.chars_before
    calls = {call.tool_use_id: call for call in result.calls}
    drops = [(d, calls[d.tool_use_id]) for d in result.decisions if d.action == DROP]
    assert len({input_chars(call.input) for _, call in drops}) > 1
    for decision, call in drops:
        # Its output and its input (measured once, at the start: the call's own), less its marker line.
        marker = drop_marker(call.tool, call_target(call.tool, call.input), call.result_chars, call.is_error, decision.archive_path)
        assert decision.chars_freed == call.result_chars + input_chars(call.input) - len(marker) - 1
    # The markers and cuts the compaction made once and handed to its rebuild are the ones a
    # rebuild from the decisions alone makes.
    assert result.messages == apply_decisions(messages, result.decisions, result.calls, shape_of(CompactOptions()))
