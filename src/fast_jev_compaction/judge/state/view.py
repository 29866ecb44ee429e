"""The view of one state, built once and shared by every question about it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from .calls import StateCall, calls_of
from .inputs import as_text


@dataclass(frozen=True)
class Entry:
    pos: int
    msg_index: int
    role: str
    text: str


@dataclass
class StateView:
    goal: str
    entries: list[Entry]
    calls: dict[str, StateCall]
    ordered: list[StateCall]
    last_index: int  # the last message's index, as far as the state tells
    file_calls_by_base: dict[str, list[StateCall]] = field(default_factory=dict)
    cut_file_calls: list[StateCall] = field(default_factory=list)
    rerun_last: dict[str, int] = field(default_factory=dict)  # key -> largest seq
    head_last: dict[str, int] = field(default_factory=dict)

    def later_same_file(self, call: StateCall) -> list[StateCall]:
        """Later reads and edits of the file ``call`` worked on, in order."""
        if call.file is None:
            return []
        target = call.file
        if target.cut:
            # a cut path has no reliable basename: compare against every file call
            pool = [c for group in self.file_calls_by_base.values() for c in group] + self.cut_file_calls
        else:
            pool = self.file_calls_by_base.get(target.base, []) + self.cut_file_calls
        later = [c for c in pool if c.seq > call.seq and c.file is not None and target.same_file(c.file)]
        return sorted(later, key=lambda c: c.seq)

    def later_read_of(self, call: StateCall) -> bool:
        # a later full read, or a re-read of the same range, replaces this output
        return any(
            other.kind == "read" and other.range_key in ("", call.range_key) for other in self.later_same_file(call)
        )

    def rerun_later(self, call: StateCall) -> bool:
        """An identical later call, or a later run of the same test suite."""
        if call.rerun_key and self.rerun_last.get(call.rerun_key, -1) > call.seq:
            return True
        return bool(call.head_key) and self.head_last.get(call.head_key, -1) > call.seq


def _entry_index(entry: Mapping[str, Any], position: int) -> int:
    value = entry.get("i")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return position
    return int(value)


def read_state(state: Mapping[str, Any]) -> StateView:
    """The view of a validated state (:func:`validate_state`)."""
    goal = as_text(state.get("goal", ""))
    history = state.get("history")
    raw_entries = [e for e in history if isinstance(e, Mapping)] if isinstance(history, list) else []

    entries: list[Entry] = []
    calls: dict[str, StateCall] = {}
    ordered: list[StateCall] = []
    last_index = 0
    for pos, raw_entry in enumerate(raw_entries):
        msg_index = _entry_index(raw_entry, pos)
        role = as_text(raw_entry.get("role", ""))
        entries.append(Entry(pos, msg_index, role, as_text(raw_entry.get("text", ""))))
        raw_calls = raw_entry.get("tool_calls")
        found = [c for raw in (raw_calls if isinstance(raw_calls, list) else []) for c in calls_of(raw)]
        # A message with completed calls is followed by their results: the conversation goes on
        # at least one message past it.
        last_index = max(last_index, msg_index + 1 if found else msg_index)
        for call in found:
            call.seq, call.pos, call.msg_index = len(ordered), pos, msg_index
            ordered.append(call)
            calls.setdefault(call.id, call)

    view = StateView(goal=goal, entries=entries, calls=calls, ordered=ordered, last_index=last_index)
    for call in ordered:
        if call.file is not None:
            if call.file.cut:
                view.cut_file_calls.append(call)
            else:
                view.file_calls_by_base.setdefault(call.file.base, []).append(call)
        if call.rerun_key:
            view.rerun_last[call.rerun_key] = call.seq
        if call.head_key:
            view.head_last[call.head_key] = call.seq
    return view
