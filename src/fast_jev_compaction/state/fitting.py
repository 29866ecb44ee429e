"""Fit the Jev state into its token budget, shrinking the least useful parts first (upstream §4)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from operator import attrgetter
from typing import Any, Iterator, Sequence

from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing, PendingCall, ToolCall, is_pinned
from ..errors import FittingError
from ..textutil import ELLIPSIS, abridge, collapsed, format_number, js_json, plain_json
from .history import DIGEST_CHARS, RenderMemo, history_entries, history_entry, input_json, result_note, shown_messages
from .questions import STATE_CONTEXT
from .tokens import QUOTES_TENTHS, estimate_tokens, from_tally, json_tally, ordered_estimate, tally, tally_bounds

INPUT_STAGES = ((1000, "full"), (200, "inputs<=200"), (60, "inputs<=60"))
# The stages that show every call with its output's digest, the first ones: fit_detailed walks
# them, and the plan's single state is one of them (windows.py).
DETAILED_STAGES = tuple(stage for stage in INPUT_STAGES if stage[0] in DIGEST_CHARS)
ABRIDGE_HEAD, ABRIDGE_TAIL = 400, 150
ABRIDGE_OVER = ABRIDGE_HEAD + ABRIDGE_TAIL + 40


@dataclass(frozen=True)
class FittedState:
    state: dict[str, Any]
    tokens: int
    stage: str


def entry_tokens(entry: dict[str, Any], memo: RenderMemo | None = None) -> int:
    """An entry's cost inside the history array; +1 for the separating comma.

    With a memo, the entry is not rendered whole: its parts' tallies, each rendered once, add up
    (tokens.tally), and only an estimate that depends on the order of the pieces is redone on
    the whole entry.
    """
    if memo is not None:
        least, exact = _least_entry_tokens(entry, memo)
        return least if exact else ordered_estimate(plain_json(entry)) + 1
    return estimate_tokens(plain_json(entry)) + 1


def _least_entry_tokens(entry: dict[str, Any], memo: RenderMemo) -> tuple[int, bool]:
    """:func:`entry_tokens` from its parts' tallies, True, when they decide it; else the least it
    can be, False: the exact sum, which JavaScript's float additions can only push up by one."""
    parts = _entry_tally(entry, memo)
    if parts is None:
        return entry_tokens(entry), True
    least, most = tally_bounds(*parts)
    return least + 1, least == most


def item_tokens(item: dict[str, Any], memo: RenderMemo) -> int:
    """:func:`entry_tokens` of a rendered call: from the memo's tally of it, which the entries
    showing the call add up too (the call is rendered and tallied once)."""
    tokens = from_tally(*memo.tally(item))
    return (ordered_estimate(plain_json(item)) if tokens is None else tokens) + 1


def _entry_tally(entry: dict[str, Any], memo: RenderMemo) -> tuple[int, int] | None:
    """``tally(plain_json(entry))`` from the tallies of its keys and values: the JSON of an
    entry is its keys' and values' JSON joined by punctuation, which splits no run of letters or
    digits. None for an entry of another shape."""
    count = len(entry)
    # The braces and the commas between the keys; each item of a list is ours to add.
    tenths, others = 9 * (count + 1), count + 1
    for key, value in entry.items():
        found = _KEY_TALLIES.get(key)
        if found is None:
            return None
        tenths += found[0]
        others += found[1]
        if type(value) is int:
            if value < 0:
                return None
            tenths += 5 * len(str(value))
        elif type(value) is str:
            t, o = memo.tally(value)
            tenths += t
            others += o
        elif type(value) is list:
            # The brackets and the commas between the items.
            items = len(value)
            tenths += 9 * (items + 1) if items else 18
            others += items + 1 if items else 2
            for item in value:
                if type(item) is not str and type(item) is not dict:
                    return None
                t, o = memo.tally(item)
                tenths += t
                others += o
        else:
            return None
    return tenths, others


def build_state(goal: str, history: list[dict[str, Any]]) -> dict[str, Any]:
    return {"context": STATE_CONTEXT, "goal": goal, "history": history}


@lru_cache(maxsize=8)
def state_base_tokens(goal: str) -> int:
    """The cost of a state with an empty history: the fixed context's tally, kept, and the
    goal's (the goal's JSON is set off by punctuation, so the tallies add up; tokens.tally)."""
    tenths, others = tally(js_json(goal))
    tokens = from_tally(_BLANK_STATE[0] + tenths - QUOTES_TENTHS, _BLANK_STATE[1] + others - 2)
    return estimate_tokens(js_json(build_state(goal, []))) if tokens is None else tokens


# The tally of a state with an empty goal and an empty history.
_BLANK_STATE = tally(js_json(build_state("", [])))


class _Budget:
    """Running estimate: base cost plus the cost of each live entry, updated one entry at a time."""

    def __init__(self, goal: str, entries: list[dict[str, Any]], limit: float, memo: RenderMemo | None = None) -> None:
        self.base = state_base_tokens(goal)
        self.memo = memo
        self.costs = [entry_tokens(entry, memo) for entry in entries]
        self.tokens = self.base + sum(self.costs)
        self.limit = limit

    def fits(self) -> bool:
        return self.tokens <= self.limit

    def update(self, position: int, entry: dict[str, Any] | None) -> None:
        new = 0 if entry is None else entry_tokens(entry, self.memo)
        self.tokens += new - self.costs[position]
        self.costs[position] = new


def fit_state(
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    goal: str,
    preserve_recent_messages: int,
    max_state_tokens: float,
    memo: RenderMemo | None = None,
) -> FittedState:
    """Walk the stages in order and return the first state that fits ``max_state_tokens``.

    ``memo`` holds what other states of the same compaction rendered already.
    """
    total = len(messages)
    if memo is None:
        memo = RenderMemo()
    smallest_chars = INPUT_STAGES[-1][0]

    @cache
    def smallest() -> tuple[list[dict[str, Any]], list[bool]]:
        """The smallest input stage's entries (the ones the steps shrink), and which are pinned."""
        entries = history_entries(messages, pairing, smallest_chars, memo)
        return entries, [is_pinned(entry["i"], total, preserve_recent_messages) for entry in entries]

    def any_can_fit() -> bool:
        # When no state short of the merge can fit, the stages are not walked: only the merge can.
        return _floor_tokens(goal, *smallest(), messages, pairing, max_state_tokens, memo) <= max_state_tokens

    # With many calls every input stage is likely too large: the bound, taken first, can then
    # spare the stages altogether (the full one's digests included). Fewer calls are walked
    # without it. Only the work done depends on this choice, never the state.
    walk = len(pairing.calls) * _FULL_CALL_TOKENS <= max_state_tokens or any_can_fit()
    if walk:
        fitted = fit_detailed(messages, pairing, goal, max_state_tokens, memo)
        if fitted is not None:
            return fitted
        budget = _Budget(goal, smallest()[0], max_state_tokens, memo)
        if budget.fits():
            return FittedState(build_state(goal, smallest()[0]), budget.tokens, INPUT_STAGES[-1][1])

    entries, pinned = smallest()
    # Old (unpinned) entries first, oldest first; pinned ones are only abridged, and last.
    order = [p for p in range(len(entries)) if not pinned[p]] + [p for p in range(len(entries)) if pinned[p]]
    left_out: set[int] = set()
    for stage, position in _shrink(messages, pairing, entries, pinned, order, left_out, memo):
        if walk:
            budget.update(position, None if position in left_out else entries[position])
            if budget.fits():
                history = [e for p, e in enumerate(entries) if p not in left_out]
                return FittedState(build_state(goal, history), budget.tokens, stage)

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
    budget = _Budget(goal, merged, max_state_tokens, memo)
    if budget.fits():
        return FittedState(build_state(goal, merged), budget.tokens, "old calls merged")
    raise FittingError(
        f"history too large for Jev (~{budget.tokens} tokens after truncation, limit {format_number(max_state_tokens)})"
    )


def fit_detailed(
    messages: Sequence[SessionMessage], pairing: Pairing, goal: str, limit: float, memo: RenderMemo
) -> FittedState | None:
    """The first of the stages that show every call with its output's digest (``full``,
    ``inputs<=200``) whose state fits ``limit``, as :func:`fit_state` gives it; None when neither
    fits.

    Each entry has a floor, the cost of the entry with its calls' digests empty and their
    inputs cut to the shorter stage's length, which no stage goes under (0 where the history
    most likely fits: LIKELY_FIT_CHARS_PER_TOKEN). A stage starts from the floors' sum and
    replaces them one entry at a time, entries whose outputs are read already first, and is
    given up as soon as the sum passes ``limit``: most outputs are then never read.
    """
    outputs = memo.outputs(messages)
    guessed = _guessed_chars(messages, pairing, memo)
    if guessed > GUESSED_CHARS_PER_TOKEN * limit:
        return None
    shown = list(shown_messages(messages, pairing, memo))
    floors = [0] * len(shown)
    floor = state_base_tokens(goal)
    if guessed > LIKELY_FIT_CHARS_PER_TOKEN * limit:
        guesses = [_size_guess(item) for item in shown]
        # Largest first, as their lengths suggest: a sum that passes the limit passes it after
        # fewer entries (every floor is positive, so whether it passes does not depend on the order).
        for position in sorted(range(len(shown)), key=guesses.__getitem__, reverse=True):
            index, message, calls, waiting = shown[position]
            tenths = _frame_tenths(index, message, calls, waiting, outputs, memo) + memo.tally(message.text)[0]
            floors[position] = -(-tenths // 10) + 1
            floor += floors[position]
            if floor > limit:
                return None
    # Entries whose outputs are read already first, those with more calls (more digests above
    # their floors) first among them: no entry costs less than its floor, so again whether the
    # sum passes the limit does not depend on the order.
    keys = [
        (not all(memo.has_read(outputs.get(c.tool_use_id) or "") for c in calls or ()), -len(calls or ()))
        for _, _, calls, _ in shown
    ]
    order = sorted(range(len(shown)), key=keys.__getitem__)
    for input_chars, stage in DETAILED_STAGES:
        tokens = floor
        entries: list[dict[str, Any]] = [{}] * len(shown)
        # Entries whose estimate depends on the order of their pieces (rare, and costly to
        # settle: the entry is written whole) count their least until the stage could fit.
        unsettled: list[tuple[dict[str, Any], int]] = []
        for position in order:
            index, message, calls, waiting = shown[position]
            entry = entries[position] = history_entry(index, message, calls, waiting, input_chars, outputs, memo)
            least, exact = _least_entry_tokens(entry, memo)
            tokens += least - floors[position]
            if tokens > limit:
                break
            if not exact:
                unsettled.append((entry, least))
        else:
            for entry, least in unsettled:
                tokens += entry_tokens(entry, memo) - least
                if tokens > limit:
                    break
            else:
                return FittedState(build_state(goal, entries), tokens, stage)
    return None


# A history whose entries' size guesses (_size_guess) come to more than this many characters per
# token of the limit is not tried: the floors alone, which cost a fifth of the core on the corpus,
# would mostly be spent to find it does not fit. On the corpus every history takes at least one
# token per 2.8 guessed characters (1.5 to 2.8), and the largest that fits takes 1.8 per token of
# its limit. A history of long runs of spaces could fit and not be tried; windows then ask about
# its calls, each request within the same budgets.
GUESSED_CHARS_PER_TOKEN = 3
# A history whose size guess comes to at most this many characters per token of the limit most
# likely fits: its floors, which only serve to give up early, are not worked out (each is
# then 0, under every entry). On the corpus each of the 4 such histories fits, and these
# floors cost about as much as costing their entries.
LIKELY_FIT_CHARS_PER_TOKEN = 1.5


def _size_guess(shown: tuple[int, SessionMessage, list[ToolCall] | None, list[PendingCall] | None]) -> int:
    return len(shown[1].text) + _CALL_GUESS * (len(shown[2] or ()) + len(shown[3] or ()))


# A call's frame takes about this many characters with its input cut to 200.
_CALL_GUESS = 250
_TEXT = attrgetter("text")


def _guessed_chars(messages: Sequence[SessionMessage], pairing: Pairing, memo: RenderMemo) -> int:
    """``_size_guess`` summed over the shown messages without listing them (most histories are
    ruled out by this sum alone): every message with calls is shown, and every other one but
    those whose text is blank (``str.isspace``: what ``strip`` removes). Each call's message
    is one of ``messages``, as the pairing of them says."""
    completed, pending = memo.by_message(pairing)
    texts = list(map(_TEXT, messages))
    chars = sum(map(len, texts))
    if any(map(str.isspace, texts)):
        chars -= sum(len(text) for i, text in enumerate(texts) if text.isspace() and i not in completed and i not in pending)
    return chars + _CALL_GUESS * (sum(map(len, completed.values())) + sum(map(len, pending.values())))


def _frame_tenths(
    index: int,
    message: SessionMessage,
    calls: list[ToolCall] | None,
    waiting: list[PendingCall] | None,
    outputs: dict[str, str],
    memo: RenderMemo,
) -> int:
    """An entry's floor (see fit_detailed) without its text, in tenths: the exact tally of the
    entry at the ``full`` and ``inputs<=200`` stages is at least this plus its text's tally (a
    cut input's opening is a prefix of the longer cut, and a prefix never tallies more; a
    digest, shown for each call with an output, tallies at least as much as an empty one).

    Added up from its parts' tallies, as :func:`_entry_tally` adds them (the keys and the
    punctuation are constants), without writing the entry's JSON: ``tally(plain_json(entry))``
    less an empty text's quotes, for the entry with an empty text, the calls' inputs cut to the
    shorter stage's length less their cut mark, and an empty digest for each call with an output.
    """
    cut = DETAILED_STAGES[-1][0]
    tenths = _ENTRY_FRAME + 5 * len(str(index)) + json_tally(message.role)[0]
    if calls:
        tenths += _LIST_FRAME["tool_calls"] + 9 * len(calls)
        for call in calls:
            tenths += (
                (_CALL_FRAME_WITH_DIGEST if outputs.get(call.tool_use_id) else _CALL_FRAME)
                + json_tally(call.id)[0] + json_tally(call.tool)[0] + json_tally(result_note(call))[0]
                + json_tally(_uncut(input_json(call.input, cut, memo)))[0]
            )
    if waiting:
        tenths += _LIST_FRAME["pending_calls"] + 9 * len(waiting)
        for pending in waiting:
            tenths += (
                _PENDING_FRAME + json_tally(pending.tool_use_id)[0] + json_tally(pending.tool)[0]
                + json_tally(_uncut(input_json(pending.input, cut, memo)))[0]
            )
    return tenths


# The tallies of _frame_tenths' keys and punctuation, from entries with empty values: an entry's
# (its "i" a digit, its role's and text's quotes left out), a list's (its key, the comma before
# it and its brackets, less one comma: each item adds one, 9 tenths), and a call's (its values'
# quotes left out, an empty digest's kept).
_ENTRY_FRAME = tally(plain_json({"i": 0, "role": "", "text": ""}))[0] - 5 - 2 * QUOTES_TENTHS
_LIST_FRAME = {
    key: tally(plain_json({"i": 0, "role": "", "text": "", key: []}))[0] - 5 - 2 * QUOTES_TENTHS - _ENTRY_FRAME - 9
    for key in ("tool_calls", "pending_calls")
}
_CALL_FRAME = tally(plain_json({"id": "", "tool": "", "input": "", "result": ""}))[0] - 4 * QUOTES_TENTHS
_CALL_FRAME_WITH_DIGEST = tally(plain_json({"id": "", "tool": "", "input": "", "result": "", "digest": ""}))[0] - 4 * QUOTES_TENTHS
_PENDING_FRAME = tally(plain_json({"tool_use_id": "", "tool": "", "input": ""}))[0] - 3 * QUOTES_TENTHS


def _uncut(text: str) -> str:
    return text[:-1] if text.endswith(ELLIPSIS) else text


def _shrink(
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    entries: list[dict[str, Any]],
    pinned: list[bool],
    order: list[int],
    left_out: set[int],
    memo: RenderMemo,
) -> Iterator[tuple[str, int]]:
    """The steps after the input stages, in order; each changes one entry in place (or adds it to
    ``left_out``) and yields the name of its stage and the entry's position."""
    for position in order:
        entry = entries[position]
        if len(entry["text"]) <= ABRIDGE_OVER:
            continue
        entry["text"] = abridge(entry["text"], ABRIDGE_HEAD, ABRIDGE_TAIL)
        yield "texts abridged", position

    for position in order:
        entry = entries[position]
        if pinned[position] or not entry["text"]:
            continue
        entry["text"] = collapsed(len(messages[entry["i"]].text))
        yield "old messages collapsed", position

    completed, _ = memo.by_message(pairing)
    for position in order:
        entry = entries[position]
        if pinned[position] or "tool_calls" not in entry:
            continue
        entry["tool_calls"] = [memo.one_line(call) for call in completed[entry["i"]]]
        yield "old calls compacted", position

    for position in order:
        entry = entries[position]
        # Pending calls stay visible at every stage: they are work still in progress.
        if pinned[position] or "tool_calls" in entry or "pending_calls" in entry:
            continue
        left_out.add(position)
        yield "old messages left out", position


def _floor_tokens(
    goal: str,
    smallest: list[dict[str, Any]],
    pinned: list[bool],
    messages: Sequence[SessionMessage],
    pairing: Pairing,
    limit: float,
    memo: RenderMemo,
) -> int:
    """A lower bound on the estimate of every state from the second input stage to the last
    step before the merge (the full stage included), from the entries of the smallest input stage
    (not yet shrunk); it stops as soon as it passes ``limit`` (texts, the finer part, are looked
    at only when the rest does not pass it).

    Each entry that is never left out costs at least its smallest text form and the smaller of
    its calls as rendered at the smallest stage, less their cut marks, and as one-liners (an
    entry's calls change form together; pinned ones never do). No stage renders a call smaller:
    a larger stage's input is a longer cut of the same JSON, and a prefix never tallies more than
    the whole. Estimates add up over JSON fragments (tokens.tally), and an entry's estimate is at
    least its exact tally rounded up.
    """
    completed, _ = memo.by_message(pairing)
    tokens = state_base_tokens(goal)
    kept: list[tuple[int, int]] = []  # (position, tenths without the text)
    for position, entry in enumerate(smallest):
        calls, waiting = entry.get("tool_calls", []), entry.get("pending_calls", [])
        if not pinned[position] and not calls and not waiting:
            continue  # may be left out
        rendered = {**entry, "text": ""}
        cut_marks = sum(1 for item in (*calls, *waiting) if item["input"].endswith(ELLIPSIS))
        if any("digest" in item for item in calls):
            rendered["tool_calls"] = [{k: v for k, v in item.items() if k != "digest"} for item in calls]
        tenths = tally(plain_json(rendered))[0] - _CUT_MARK * cut_marks
        if calls and not pinned[position]:
            one_lined = {**rendered, "tool_calls": [memo.one_line(call) for call in completed[entry["i"]]]}
            pending_marks = sum(1 for item in waiting if item["input"].endswith(ELLIPSIS))
            tenths = min(tenths, tally(plain_json(one_lined))[0] - _CUT_MARK * pending_marks)
        kept.append((position, tenths))
        tokens += -(-tenths // 10) + 1
        if tokens > limit:
            return tokens
    tokens = state_base_tokens(goal)
    for position, tenths in kept:
        text = messages[smallest[position]["i"]].text
        forms = [memo.tally(text)[0]]  # the same object as the detailed stages' (and windows') text
        if len(text) > ABRIDGE_OVER:
            forms.append(tally(plain_json(abridge(text, ABRIDGE_HEAD, ABRIDGE_TAIL)))[0])
        if not pinned[position] and text:
            forms.append(tally(plain_json(collapsed(len(text))))[0])
        tenths += min(forms) - QUOTES_TENTHS
        tokens += -(-tenths // 10) + 1
    return tokens


# A call at the full stage, its input and a 300-character digest shown, rarely costs less.
_FULL_CALL_TOKENS = 100
_CUT_MARK = 9  # the tally of the ``…`` ending a cut input
# Each key of a history entry with its quotes and the colon after it.
_KEY_TALLIES = {
    key: (tally(plain_json(key))[0] + 9, tally(plain_json(key))[1] + 1)
    for key in ("i", "role", "text", "tool_calls", "pending_calls")
}


def _foldable(entry: dict[str, Any], pinned: bool) -> bool:
    calls = entry.get("tool_calls") or []
    return (
        not pinned
        and entry["text"] == ""
        and "pending_calls" not in entry
        and bool(calls)
        and isinstance(calls[0], str)
    )
