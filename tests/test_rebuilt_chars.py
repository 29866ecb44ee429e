"""The compacted size counted by a walk over positions equals measuring every output message."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fast_jev_compaction.compaction import compact_sync
from fast_jev_compaction.judge.local import LocalJudge
from fast_jev_compaction.messages import SessionMessage
from fast_jev_compaction.stats import message_chars, rebuilt_chars
from fast_jev_compaction.synthetic import transcript_lines
from fast_jev_compaction.transcript import parse_transcript


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=6), st.sampled_from(["same", "new", "gone", "untouched"])), max_size=20))
def test_rebuilt_chars_is_the_sum_over_the_output(plan: list[tuple[str, str]]) -> None:
    """Touched positions may stay the same object, become a new one or go; the rest stay."""
    messages = [SessionMessage(role="user", text=text) for text, _ in plan]
    out: list[SessionMessage] = []
    touched: set[int] = set()
    for position, (message, (_, fate)) in enumerate(zip(messages, plan)):
        if fate != "untouched":
            touched.add(position)
        if fate in ("same", "untouched"):
            out.append(message)
        elif fate == "new":
            out.append(SessionMessage(role="user", text=message.text + "cut"))
    sizes = [message_chars(m) for m in messages]
    assert rebuilt_chars(messages, sizes, out, touched) == sum(map(message_chars, out))


def test_a_compaction_counts_what_it_returns() -> None:
    messages = parse_transcript(list(transcript_lines(600)))
    result = compact_sync(messages, LocalJudge())
    assert result.stats.truncated + result.stats.dropped > 0
    assert result.stats.chars_after == sum(map(message_chars, result.messages))
    assert result.stats.chars_after < result.stats.chars_before
