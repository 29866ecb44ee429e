"""Windowed states: the judge's requests, each state sized by the calls it asks about.

A state costs tokens in every request that carries it, so its size follows the questions, not
the history: each asked call brings its own detail and ``SURROUND_PER_CALL`` tokens of the
history around it. When the whole history fits that room with the asked calls still in detail
(fitting.py's first stages) and sending it with every batch of questions costs no more than
windows would, that one state is sent: the judge sees everything. Otherwise the asked calls are split into windows, in order, and each
window gets its own state: the goal, the newest messages, the window's own calls in detail (with
their digests), and the history nearest to them as one-line calls and short texts, later
history first. A window sees less of the distant history; in exchange any size compacts, the
cost grows linearly with the asked calls, and a later pass that asks about a few new calls
sends a small state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..conversation.messages import ROLES, SessionMessage
from ..conversation.pairing import Pairing, ToolCall, pinned_positions
from ..errors import FittingError
from ..textutil import abridge, collapsed, format_number
from .fitting import (
    ABRIDGE_HEAD,
    ABRIDGE_TAIL,
    build_state,
    entry_tokens,
    fit_detailed,
    fit_state,
    item_tokens,
    state_base_tokens,
)
from .history import RenderMemo, one_line_most_chars
from .questions import REQUEST_OVERHEAD_TOKENS, batch_calls
from .tokens import QUOTES_TENTHS, estimate_tokens, from_tally, most_tokens, ordered_estimate, tally_bounds

# Window calls are shown as at the single state's first stage: inputs cut at this length, and
# the digest that goes with it.
WINDOW_INPUT_CHARS = 1000
# Tokens of surrounding history each asked call brings into its state, beyond its own detail.
# 150 rather than 300 keeps a later pass (a few re-asked calls) under a fifth of the first pass's
# tokens; on the corpus the state judge's held-out AUC went from 0.885 to 0.877 and no decision
# through `fast-jev serve` changed (`fast-jev eval --serve`).
SURROUND_PER_CALL = 150
# Newest messages keep their calls' inputs at this length.
RECENT_INPUT_CHARS = 60
# The share of a window state's room given to the window's own calls; the rest shows the
# surrounding history.
WINDOW_SHARE = 0.7
WINDOWED = "windowed"
# Entries that did not fit before the search for smaller ones stops: keeps each window's cost
# bounded by its room, not by the history's length.
MAX_MISSES = 64
# One object per role, shown in every entry: the memo tallies it once (it tallies by identity),
# not once per message.
_ROLE = {role: role for role in ROLES}


@dataclass(frozen=True)
class Request:
    """One judge request: a state and the calls asked about next to it."""

    state: dict[str, Any]
    state_tokens: int
    stage: str
    calls: list[ToolCall]


def plan_requests(
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    to_judge: list[ToolCall],
    goal: str,
    preserve_recent_messages: int,
    max_state_tokens: float,
    max_request_tokens: float,
    question_cost: dict[str, int],
) -> list[Request]:
    """The requests that ask about every call in ``to_judge``, each within both budgets."""
    largest_question = max(question_cost[call.id] for call in to_judge)
    memo = RenderMemo()  # the single state and the windows show the same calls
    state_budget = max_request_tokens - REQUEST_OVERHEAD_TOKENS - largest_question
    if state_budget < 1:
        raise FittingError("request budget leaves no room for state and questions")
    limit = min(max_state_tokens, state_budget)
    try:
        windows = _Windows(messages, pairing, goal, preserve_recent_messages, max_state_tokens, max_request_tokens,
                           question_cost, memo)
    except FittingError as overflow:
        # The newest messages alone overflow a window: only the staged single state can shrink them.
        if not _hopeless(pairing, goal, limit, memo):
            try:
                fitted = fit_state(messages, pairing, goal, preserve_recent_messages, limit, memo)
            except FittingError:
                pass
            else:
                batches = batch_calls(to_judge, fitted.tokens, max_request_tokens, question_cost)
                return [Request(fitted.state, fitted.tokens, fitted.stage, batch) for batch in batches]
        raise overflow from None
    # The single state goes in every request: it is the plan only while it still shows the asked
    # calls in detail and costs no more than the windows would, so the stages past the detailed
    # ones are not walked. A limit that rules it out rules it out under any smaller one too (no
    # stage of fit_detailed fits a smaller limit and not a larger), so it is tried against the
    # most the windows' focus can be first: only a state that fits there needs the exact focus
    # (see _Windows._call_most), and is tried again in the rare case that the focus is less.
    most = min(limit, windows.focus(to_judge, closed=False))
    single = fit_detailed(messages, pairing, goal, most, memo)
    if single is not None:
        limit = min(limit, windows.focus(to_judge))
        if limit < most:
            single = fit_detailed(messages, pairing, goal, limit, memo)
        # Not even one line per call fitting rules the single state out too; asked only of a
        # state that fits, since it renders every call's line, which windows mostly never show.
        if single is not None and _hopeless(pairing, goal, limit, memo):
            single = None
    if single is not None:
        batches = batch_calls(to_judge, single.tokens, max_request_tokens, question_cost)
        # One batch needs no comparison: the state fits the limit, at most focus(to_judge), and
        # the windows cost at least that (each holds the goal and the newest messages, and
        # together every asked call with its share).
        if len(batches) == 1 or len(batches) * single.tokens <= windows.cost(to_judge):
            return [Request(single.state, single.tokens, single.stage, batch) for batch in batches]
    return windows.requests(to_judge)


def _hopeless(pairing: Pairing, goal: str, limit: float, memo: RenderMemo) -> bool:
    """True when even one line per call cannot fit: every stage of fit_state keeps those lines."""
    total = state_base_tokens(goal)
    # Not even close whatever the lines (tokens.most_tokens of the longest each can be): they
    # are not rendered.
    if total + sum(2 * one_line_most_chars(call) + 1 for call in pairing.calls) <= limit:
        return False
    lines = [memo.one_line(call) for call in pairing.calls]
    if total + sum(map(most_tokens, lines)) <= limit:
        return False  # not even close: no need to estimate each line
    for line in lines:
        total += estimate_tokens(line)
        if total > limit:
            return True
    return False


def _text_tokens(text: str, memo: RenderMemo) -> int:
    """``estimate_tokens(text)``; when the text's JSON is the text in quotes (nothing in it is
    escaped), from the memo's tally of that JSON, which the entries showing the text read too."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        tenths, others = memo.tally(text)
        tokens = from_tally(tenths - QUOTES_TENTHS, others - 2)  # the quotes: two 0.9 pieces
        return ordered_estimate(text) if tokens is None else tokens
    return estimate_tokens(text)


class _Windows:
    def __init__(
        self,
        messages: Sequence[SessionMessage],
        pairing: Pairing,
        goal: str,
        preserve_recent_messages: int,
        max_state_tokens: float,
        max_request_tokens: float,
        question_cost: dict[str, int],
        memo: RenderMemo,
    ) -> None:
        self.messages = messages
        self.goal = goal
        self.max_state = max_state_tokens
        self.max_request = max_request_tokens
        self.question_cost = question_cost
        self.memo = memo
        self._abridged_texts: dict[int, str] = {}
        self.completed, self.pending = memo.by_message(pairing)
        self.outputs = memo.outputs(messages)
        total = len(messages)
        # The pinned messages (pairing.is_pinned: the first and the newest) and the unfinished
        # work are in every window's state, those that show anything; the others are found as
        # _surround walks out from a window, never all of them.
        required = {*pinned_positions(total, preserve_recent_messages), *self.pending}
        self.required = [i for i in sorted(required) if self._shows(i)]
        self.base = state_base_tokens(goal)
        self.required_entries = {i: self._brief(i, RECENT_INPUT_CHARS) for i in self.required}
        # Costed once: every window's state holds them, and one that shows its call in detail
        # there replaces the entry's cost by the detailed one's.
        self.required_costs = {i: entry_tokens(entry, memo) for i, entry in self.required_entries.items()}
        self.required_tokens = sum(self.required_costs.values())
        if self.base + self.required_tokens > min(max_state_tokens, max_request_tokens):
            raise FittingError(
                f"newest messages too large for Jev (~{self.base + self.required_tokens} tokens, "
                f"limit {format_number(min(max_state_tokens, max_request_tokens))})"
            )
        self._context_cost: dict[int, tuple[dict[str, Any], int]] = {}
        self._call_costs: dict[str, int] = {}
        # Calls whose cost above is a bound (see _call_most): the rendered call, and what the
        # bound counts for it.
        self._open: dict[str, tuple[dict[str, Any], int]] = {}
        self._text_costs: dict[int, int] = {}

    def _shows(self, index: int) -> bool:
        """Whether the message at ``index`` shows anything: text, or calls done or waiting."""
        return index in self.completed or index in self.pending or bool(self.messages[index].text.strip())

    def _brief(self, index: int, input_chars: int) -> dict[str, Any]:
        """A required entry: text abridged, calls structured with short inputs."""
        message = self.messages[index]
        entry: dict[str, Any] = {"i": index, "role": _ROLE.get(message.role, message.role), "text": self._abridged(index)}
        if index in self.completed:
            entry["tool_calls"] = [
                self.memo.call(c, input_chars, self.outputs.get(c.tool_use_id)) for c in self.completed[index]
            ]
        if index in self.pending:
            entry["pending_calls"] = [self.memo.pending(c, input_chars) for c in self.pending[index]]
        return entry

    def _context(self, index: int) -> tuple[dict[str, Any], int]:
        """A surrounding entry, rendered once: one-line calls, user text abridged, other text collapsed."""
        cached = self._context_cost.get(index)
        if cached is None:
            message = self.messages[index]
            text = message.text
            if text:
                text = self._abridged(index) if message.role == "user" else collapsed(len(text))
            entry: dict[str, Any] = {"i": index, "role": _ROLE.get(message.role, message.role), "text": text}
            if index in self.completed:
                entry["tool_calls"] = [self.memo.one_line(c) for c in self.completed[index]]
            # Rendered whole: its parts show nowhere else.
            cached = (entry, entry_tokens(entry))
            self._context_cost[index] = cached
        return cached

    def _detailed(self, index: int, window: set[str]) -> dict[str, Any]:
        message = self.messages[index]
        text = self._abridged(index)
        calls = [
            self.memo.call(c, WINDOW_INPUT_CHARS, self.outputs.get(c.tool_use_id)) if c.id in window else self.memo.one_line(c)
            for c in self.completed.get(index, [])
        ]
        return {"i": index, "role": _ROLE.get(message.role, message.role), "text": text, "tool_calls": calls}

    def focus(self, calls: list[ToolCall], closed: bool = True) -> int:
        """The state a request asking about ``calls`` may take: the goal, the newest messages,
        and each call's detail with its share of the surrounding history; or, not ``closed``,
        the most it can be (see :meth:`_call_most`)."""
        call_cost = self._call_cost if closed else self._call_most
        return self.base + self.required_tokens + sum(call_cost(call) + SURROUND_PER_CALL for call in calls)

    def cost(self, to_judge: list[ToolCall]) -> int:
        """What the windows' states would take at most, together."""
        return sum(self.focus(window) for window in self._split(to_judge))

    def requests(self, to_judge: list[ToolCall]) -> list[Request]:
        requests: list[Request] = []
        for window in self._split(to_judge):
            requests.extend(self._request(window))
        return requests

    def _room(self) -> float:
        return min(self.max_state, self.max_request - REQUEST_OVERHEAD_TOKENS) - self.base - self.required_tokens

    def _split(self, to_judge: list[ToolCall]) -> list[list[ToolCall]]:
        """Consecutive windows whose detail and questions take at most WINDOW_SHARE of the room."""
        room = self._room() * WINDOW_SHARE
        windows: list[list[ToolCall]] = []
        current: list[ToolCall] = []
        used = 0.0
        unsure = 0  # open estimates in ``used``: the exact sum may be as much less
        for call in to_judge:
            cost = self._call_most(call) + self.question_cost[call.id]
            opened = unsure + (call.id in self._open)
            if current and used + cost - opened <= room < used + cost:
                # The bounds do not tell: the window's calls and this one, exact.
                used = sum(self._call_cost(c) + self.question_cost[c.id] for c in current)
                cost, opened = self._call_cost(call) + self.question_cost[call.id], 0
            if current and used + cost > room:
                windows.append(current)
                current, used, opened = [], 0.0, call.id in self._open
            current.append(call)
            used += cost
            unsure = opened
        if current:
            windows.append(current)
        return windows

    def _call_cost(self, call: ToolCall) -> int:
        """The detailed call plus a share of its message's text, when that message is not shown
        anyway: :meth:`_call_most`, its estimate closed."""
        cost = self._call_most(call)
        opened = self._open.pop(call.id, None)
        if opened is not None:
            item, most = opened
            cost = self._call_costs[call.id] = cost - most + item_tokens(item, self.memo)
        return cost

    def _call_most(self, call: ToolCall) -> int:
        """:meth:`_call_cost`, or one more where the call's estimate is left open: where its
        tally's exact sum is whole, JavaScript's float additions put it up by one or not (up, for
        37 of a corpus pass's 40), and adding the pieces in order to find out costs about as much
        as the tally did; most plans never need to know (see plan_requests and _split). Kept, as
        the plan and the split both read it."""
        cost = self._call_costs.get(call.id)
        if cost is None:
            item = self.memo.call(call, WINDOW_INPUT_CHARS, self.outputs.get(call.tool_use_id))
            least, most = tally_bounds(*self.memo.tally(item))
            if least != most:
                self._open[call.id] = (item, most + 1)
            cost = most + 1  # the comma after it, as item_tokens counts
            if call.call_index not in self.required_entries:
                cost += self._text_cost(call.call_index)
            self._call_costs[call.id] = cost
        return cost

    def _abridged(self, index: int) -> str:
        # One object per message, so that the memo tallies it once whichever entry shows it.
        text = self._abridged_texts.get(index)
        if text is None:
            text = self._abridged_texts[index] = abridge(self.messages[index].text, ABRIDGE_HEAD, ABRIDGE_TAIL)
        return text

    def _text_cost(self, index: int) -> int:
        # Shared by the calls of one message.
        cost = self._text_costs.get(index)
        if cost is None:
            cost = _text_tokens(self._abridged(index), self.memo) + 12
            self._text_costs[index] = cost
        return cost

    def _request(self, window: list[ToolCall]) -> list[Request]:
        ids = {call.id for call in window}
        first, last = window[0].call_index, window[-1].call_index
        entries: dict[int, dict[str, Any]] = dict(self.required_entries)
        tokens = self.base + self.required_tokens
        for index in sorted({call.call_index for call in window}):
            if index in self.required_entries:
                # A window call inside a newest message: shown in detail there.
                entry = {**self.required_entries[index], **self._detailed(index, ids)}
                tokens += entry_tokens(entry, self.memo) - self.required_costs[index]
            else:
                entry = self._detailed(index, ids)
                tokens += entry_tokens(entry, self.memo)
            entries[index] = entry
        questions = sum(self.question_cost[call.id] for call in window)
        limit = min(self.max_state, self.max_request - REQUEST_OVERHEAD_TOKENS - questions)
        if tokens > limit:
            # One call's detail alone overflows: show the window's calls as one-liners.
            for index in {call.call_index for call in window}:
                if index not in self.required_entries:
                    entry, cost = self._context(index)
                    tokens += cost - entry_tokens(entries[index], self.memo)
                    entries[index] = entry
            if tokens > limit:
                raise FittingError(
                    f"window too large for Jev (~{tokens} tokens, limit {format_number(limit)})"
                )
        tokens = self._surround(entries, tokens, min(limit, tokens + SURROUND_PER_CALL * len(window)), first, last)
        history = [entries[i] for i in sorted(entries)]
        state = build_state(self.goal, history)
        return [
            Request(state, tokens, WINDOWED, batch)
            for batch in batch_calls(window, tokens, self.max_request, self.question_cost)
        ]

    def _surround(self, entries: dict[int, dict[str, Any]], tokens: int, limit: float, first: int, last: int) -> int:
        """Add surrounding entries, nearest first on both sides (later history first: it says
        whether an output is still needed), until the room is spent."""
        end = len(self.messages)
        misses = 0
        # Message positions, each side's next one to look at; only those that show are taken.
        left, right = first - 1, last + 1
        while left >= 0 or right < end:
            grew = False
            for side in (1, 0):
                if side == 0:
                    while left >= 0 and not self._shows(left):
                        left -= 1
                    if left < 0:
                        continue
                    index, left = left, left - 1
                else:
                    while right < end and not self._shows(right):
                        right += 1
                    if right >= end:
                        continue
                    index, right = right, right + 1
                if index in entries:
                    grew = True
                    continue
                entry, cost = self._context(index)
                if tokens + cost <= limit:
                    entries[index] = entry
                    tokens += cost
                    grew = True
                else:
                    misses += 1
            if not grew or misses > MAX_MISSES:
                break
        return tokens
