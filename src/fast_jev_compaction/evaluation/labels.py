"""Behavioural labels: which tool outputs the conversation reused, and when (kompact's method).

An output is *needed* after a fire point when one of its distinctive snippets (an 8-word shingle
or a 24+ character id, see :mod:`..judge.reuse`) appears at or after that point in assistant
text or in a tool input. An output whose target was read again, or whose call was re-run
identically, was *reproducible*: it still counts as needed, and is reported separately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..conversation.messages import SessionMessage
from ..conversation.pairing import pair_tool_calls
from ..judge.features import call_target, replaces, result_text
from ..judge.reuse import ReuseIndex, build_reuse_index


@dataclass(frozen=True)
class OutputLabel:
    tool_use_id: str
    result_index: int
    result_chars: int
    # distinctive snippet -> the last later message that repeats it
    reuses: dict[str, int]
    # the message holding the first later call that reproduces this output, if any
    reproduced_at: int | None

    def snippets_after(self, fire: int) -> set[str]:
        """The snippets repeated at or after message ``fire``."""
        return {snippet for snippet, at in self.reuses.items() if at >= fire}

    def needed_after(self, fire: int) -> bool:
        return any(at >= fire for at in self.reuses.values())

    @property
    def reproducible(self) -> bool:
        return self.reproduced_at is not None


def label_outputs(
    messages: Sequence[SessionMessage], index: ReuseIndex | None = None
) -> dict[str, OutputLabel]:
    """A label for every completed call of the whole conversation, keyed by tool_use_id."""
    reuse = index if index is not None else build_reuse_index(messages)
    calls = pair_tool_calls(messages, 0).calls
    targets = [call_target(call) for call in calls]
    labels: dict[str, OutputLabel] = {}
    for n, (call, target) in enumerate(zip(calls, targets)):
        reproduced_at = next(
            (other.call_index for other, t in zip(calls[n + 1 :], targets[n + 1 :]) if replaces(t, target)),
            None,
        )
        labels[call.tool_use_id] = OutputLabel(
            tool_use_id=call.tool_use_id,
            result_index=call.result_index,
            result_chars=call.result_chars,
            reuses=reuse.reuses(result_text(messages, call), call.result_index),
            reproduced_at=reproduced_at,
        )
    return labels
