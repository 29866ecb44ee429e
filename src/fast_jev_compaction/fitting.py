"""Fit the Jev state into its token budget, shrinking the least useful parts first (upstream §4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .errors import FittingError
from .history import RenderMemo, calls_by_message, history_entries, one_line_call
from .messages import SessionMessage
from .pairing import Pairing, is_pinned
from .questions import STATE_CONTEXT
from .textutil import abridge, collapsed, format_number, js_json, plain_json
from .tokens import estimate_tokens, from_tally, tally

INPUT_STAGES = ((1000, "full"), (200, "inputs<=200"), (60, "inputs<=60"))
ABRIDGE_HEAD, ABRIDGE_TAIL = 400, 150
ABRIDGE_OVER = ABRIDGE_HEAD + ABRIDGE_TAIL + 40


@dataclass(frozen=True)
class FittedState:
    state: dict[str, Any]
    tokens: int
    stage: str


def entry_tokens(entry: dict[str, Any]) -> int:
    """An entry's cost inside the history array; +1 for the separating comma."""
    return estimate_tokens(plain_json(entry)) + 1


def build_state(goal: str, history: list[dict[str, Any]]) -> dict[str, Any]:
    return {"context": STATE_CONTEXT, "goal": goal, "history": history}


def state_base_tokens(goal: str) -> int:
    """The cost of a state with an empty history."""
    return estimate_tokens(js_json(build_state(goal, [])))


class _EntryCosts:
    """``entry_tokens`` from the tallies of an entry's parts (tokens.tally): each text and each
    call is tallied once however many stages show it, and the entry's JSON is rendered whole
    only when its tally cannot tell (tokens.from_tally)."""

    def __init__(self) -> None:
        # id -> (the object, its tally); the object is held so that its id stays its own
        self._tallies: dict[int, tuple[Any, tuple[int, int]]] = {}

    def _tally(self, value: Any) -> tuple[int, int]:
        found = self._tallies.get(id(value))
        if found is None or found[0] is not value:
            found = (value, tally(plain_json(value)))
            self._tallies[id(value)] = found
        return found[1]

    def __call__(self, entry: dict[str, Any]) -> int:
        # {"key":value,...}: braces, commas and colons are one 0.9 piece each
        others = 1 + 2 * len(entry)
        tenths = 9 * others
        for key, value in entry.items():
            for part in (key, *value) if isinstance(value, list) else (key, value):
                part_tenths, part_others = self._tally(part)
                tenths += part_tenths
                others += part_others
            if isinstance(value, list):
                # [a,b,c]: brackets and commas
                tenths += 9 * (len(value) + 1 if value else 2)
                others += len(value) + 1 if value else 2
        tokens = from_tally(tenths, others)
        return entry_tokens(entry) if tokens is None else tokens + 1


class _Budget:
    """Running estimate: base cost plus the cost of each live entry, updated one entry at a time."""

    def __init__(self, goal: str, entries: list[dict[str, Any]], limit: float, costs: _EntryCosts) -> None:
        self.base = state_base_tokens(goal)
        self.cost = costs
        self.costs = [costs(entry) for entry in entries]
        self.tokens = self.base + sum(self.costs)
        self.limit = limit

    def fits(self) -> bool:
        return self.tokens <= self.limit

    def update(self, position: int, entry: dict[str, Any] | None) -> None:
        new = 0 if entry is None else self.cost(entry)
        self.tokens += new - self.costs[position]
        self.costs[position] = new


def fit_state(
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    goal: str,
    preserve_recent_messages: int,
    max_state_tokens: float,
) -> FittedState:
    """Walk the stages in order and return the first state that fits ``max_state_tokens``."""
    total = len(messages)
    memo = RenderMemo()
    costs = _EntryCosts()
    for input_chars, stage in INPUT_STAGES:
        entries = history_entries(messages, pairing, input_chars, memo)
        budget = _Budget(goal, entries, max_state_tokens, costs)
        if budget.fits():
            return FittedState(build_state(goal, entries), budget.tokens, stage)

    def done(stage: str, history: list[dict[str, Any]]) -> FittedState:
        return FittedState(build_state(goal, history), budget.tokens, stage)

    pinned = [is_pinned(entry["i"], total, preserve_recent_messages) for entry in entries]
    # Old (unpinned) entries first, oldest first; pinned ones are only abridged, and last.
    order = [p for p in range(len(entries)) if not pinned[p]] + [p for p in range(len(entries)) if pinned[p]]

    for position in order:
        entry = entries[position]
        if len(entry["text"]) <= ABRIDGE_OVER:
            continue
        entry["text"] = abridge(entry["text"], ABRIDGE_HEAD, ABRIDGE_TAIL)
        budget.update(position, entry)
        if budget.fits():
            return done("texts abridged", entries)

    for position in order:
        entry = entries[position]
        if pinned[position] or not entry["text"]:
            continue
        entry["text"] = collapsed(len(messages[entry["i"]].text))
        budget.update(position, entry)
        if budget.fits():
            return done("old messages collapsed", entries)

    completed, _ = calls_by_message(pairing)
    for position in order:
        entry = entries[position]
        if pinned[position] or "tool_calls" not in entry:
            continue
        entry["tool_calls"] = [one_line_call(call) for call in completed[entry["i"]]]
        budget.update(position, entry)
        if budget.fits():
            return done("old calls compacted", entries)

    left_out: set[int] = set()
    for position in order:
        entry = entries[position]
        # Pending calls stay visible at every stage: they are work still in progress.
        if pinned[position] or "tool_calls" in entry or "pending_calls" in entry:
            continue
        left_out.add(position)
        budget.update(position, None)
        if budget.fits():
            return done("old messages left out", [e for p, e in enumerate(entries) if p not in left_out])

    kept = [(entry, pinned[p]) for p, entry in enumerate(entries) if p not in left_out]
    merged: list[dict[str, Any]] = []
    merged_pinned: list[bool] = []
    copied = False  # whether merged[-1] is a copy of its entry, its call list ours to extend
    for entry, is_pin in kept:
        if merged and _foldable(merged[-1], merged_pinned[-1]) and _foldable(entry, is_pin) and (
            merged[-1]["role"] == entry["role"]
        ):
            if not copied:
                merged[-1] = {**merged[-1], "tool_calls": list(merged[-1]["tool_calls"])}
                copied = True
            merged[-1]["tool_calls"].extend(entry["tool_calls"])
            continue
        merged.append(entry)
        merged_pinned.append(is_pin)
        copied = False
    budget = _Budget(goal, merged, max_state_tokens, costs)
    if budget.fits():
        return done("old calls merged", merged)
    raise FittingError(
        f"history too large for Jev (~{budget.tokens} tokens after truncation, limit {format_number(max_state_tokens)})"
    )


def _foldable(entry: dict[str, Any], pinned: bool) -> bool:
    calls = entry.get("tool_calls") or []
    return (
        not pinned
        and entry["text"] == ""
        and "pending_calls" not in entry
        and bool(calls)
        and isinstance(calls[0], str)
    )
