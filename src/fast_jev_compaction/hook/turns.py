"""Model turns as Claude Code needs them back: one assistant message per turn, its results next.

Claude Code hands ``session.compact`` one message per transcript record. One model response
with several tool calls is several assistant records (a text fragment, then one record per
tool_use, all sharing one ``message.id``), followed by one user record per tool_result, in the
order the tools finished. A message answered without a handle is rebuilt as a new record with a
fresh id, so those fragments no longer merge back into one turn: the engine would see
``assistant[A] assistant[B] user[result A] user[result B]``, and its pairing repair replaces
results with "[Tool result missing due to internal error]". Handles cannot stay on assistant
or tool_result messages (their copies re-link to the old history on ``--resume``; see
docs/ARCHITECTURE.md, "Parallel tool calls").

:func:`regroup` therefore rebuilds each turn as one assistant message (its text, then every
tool call the compaction kept) followed by one user message holding those calls' results.
:func:`turn_problems` checks an answer the way the engine will read it; a non-empty list means
the answer must not be sent.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..conversation.messages import Role, SessionMessage, ToolResult, ToolUse
from ..decide.archive import archive_name
from ..decide.markers import PREFIX, is_prompt_note, is_turn_index_line, saved_path
from ..decide.turn_eviction import is_prompt, same_prompt

_RECORD_IDS = frozenset({"uuid", "handle"})


# Slotted, its lists made on their first item: a long session has a turn for every other message.
@dataclass(slots=True)
class _Turn:
    """Consecutive assistant fragments of one response, and the results of their calls."""

    fragments: list[SessionMessage]
    # A tuple grown a result at a time: most turns have one, which goes out as it is.
    results: tuple[ToolResult, ...] = ()
    # The user messages the results came from; their text rides in the results message.
    result_sources: list[SessionMessage] | None = None
    # Engine text that hung on the turn's messages, carried after the turn.
    carried: str = ""
    # Its calls still without a result.
    waiting: int = 0

    @property
    def uses(self) -> tuple[ToolUse, ...]:
        if len(self.fragments) == 1:
            return self.fragments[0].toolUses
        return tuple(use for fragment in self.fragments for use in fragment.toolUses)

    def messages(self) -> list[SessionMessage]:
        out = [m for m in (_merged("assistant", self.fragments, self.uses, ()),) if m is not None]
        carried = self.carried
        if self.results:
            out.append(_merged("user", self.result_sources or [], (), self.results, carried)
                       or SessionMessage(role="user", toolResults=self.results))
        elif carried:
            out.append(SessionMessage(role="user", text=carried))
        return out


def _merged(role: Role, sources: Sequence[SessionMessage], uses: tuple[ToolUse, ...], results: tuple[ToolResult, ...],
            carried: str = "") -> SessionMessage | None:
    """One message from several; a single source that already is that message comes back as is."""
    if len(sources) == 1 and not carried and sources[0].toolUses == uses and (sources[0].toolResults or ()) == results:
        return sources[0]
    text = joined([m.text for m in sources if m.text.strip()]) + carried
    if not text.strip() and not uses and not results:
        return None
    extras: dict[str, Any] = {}
    for source in sources:
        for key, value in source.extra.items():
            if key not in _RECORD_IDS:
                extras.setdefault(key, value)
    return SessionMessage(role=role, text=text, toolUses=uses, toolResults=results or None, extra=extras)


def joined(texts: Sequence[str]) -> str:
    """Fragments' text as the engine reads a record's text blocks: joined with "" — except that a
    marker line of a dropped call always stays on a line of its own."""
    out = ""
    for text in texts:
        if out and (out.rsplit("\n", 1)[-1].startswith(PREFIX) or text.startswith(PREFIX)):
            out += "\n"
        out += text
    return out


def keeps_handle(message: SessionMessage) -> bool:
    """Whether an untouched message goes back with its engine handle.

    Claude Code 2.1.332 copies a handle-bearing message after the compact boundary as-is: a
    tool_result record keeps its parentUuid (the pre-boundary tool_use) and an assistant record
    keeps its message id, so on ``--resume`` the chain walks back across the boundary and
    same-id fragments merge, which silently restores the old history. Sent without a handle, the
    engine rebuilds them from the very same role, text and tool blocks, with fresh ids and links.
    Plain user prompts have neither problem and keep their handle.
    """
    return message.handle is not None and message.role == "user" and not message.toolResults


def _block_ids(message: SessionMessage) -> list[str]:
    """The tool_use ids a message's tool blocks name: its calls, then its results."""
    return [u.tool_use_id for u in message.toolUses] + [r.tool_use_id for r in message.toolResults or []]


def carried_by(original: Sequence[SessionMessage], hung: Mapping[str, str],
               out: Sequence[SessionMessage] | None = None) -> Callable[[SessionMessage], str]:
    """The engine text a message of the answer must carry: what hung on its source, unless it
    keeps its handle, and, given the answer ``out``, what hung on the messages that left the
    conversation in its place.

    A message rebuilt by the decisions has lost its handle; its tool blocks name the source. An
    old prompt cut to its opening (``turn_eviction.shorten_old_prompts``) has lost it too, and
    holds no block: the note closing it names the file that holds its source's text whole, by a
    hash of that text.

    A message the ladder moved out (an evicted turn's replies and results, the older part of the
    turn in flight, the folded conversation) has no message of its own in ``out``: its file
    holds its text, yet not what hung on it, and the file is content-addressed and may be shared,
    so the text goes to what stands in its place (:func:`_left_behind`).
    """
    # Only a source with hung text matters (the others carry ""): the maps skip the rest.
    by_block = {block_id: m.handle for m in original if m.handle in hung for block_id in _block_ids(m)}
    by_file = {
        archive_name(m.text): m.handle
        for m in original if m.handle in hung and m.role == "user" and not m.toolResults and not m.toolUses
    }

    def source(message: SessionMessage) -> str | None:
        handle = message.handle
        if handle is None:
            block_ids = _block_ids(message)
            handle = by_block.get(block_ids[0]) if block_ids else _cut_prompt_source(message, by_file)
        return handle

    left = _left_behind(original, out, hung, source) if out is not None and hung else {}

    def carried(message: SessionMessage) -> str:
        extra = left.get(id(message), "")
        if keeps_handle(message):
            return extra
        handle = source(message)
        return (hung.get(handle, "") if handle is not None else "") + extra

    return carried


def _left_behind(original: Sequence[SessionMessage], out: Sequence[SessionMessage], hung: Mapping[str, str],
                 source: Callable[[SessionMessage], str | None]) -> dict[int, str]:
    """The hung text of the messages of ``original`` that ``out`` no longer holds, by the
    ``id()`` of the message of ``out`` that takes it.

    The ladder keeps the conversation's order, so one walk forward finds each answer message's
    source: the same object; the same handle; :func:`carried_by`'s source; the first tool block
    (of any source, hung text or not: a rebuilt call or result is no stand-in); an old prompt
    cut to its opening, by the file its note names (hashed from its text); a reply whose calls
    were all dropped, by the text it begins with (as :func:`replies_after`); a prompt the pass
    rebuilt (rung c: same text, a new object without a handle), as the next prompt of
    ``original`` the ladder's own rule takes for it (``turn_eviction.same_prompt``; prompts
    never change order). The last two have no handle or block to carry their source's text by,
    so it is given to them here.

    A source found nowhere leaves a gap between the sources before and after it; its text goes
    to the first message of ``out`` with no source in that gap (an index line, a fold note: what
    took its place), else to the last message before the gap (else the first of ``out``), so
    nothing the engine hung on a message disappears.
    """
    if not out or not any(m.handle in hung for m in original):
        return {}
    by_identity = {id(m): at for at, m in enumerate(original)}
    by_handle = {m.handle: at for at, m in enumerate(original) if m.handle is not None}
    # Every source's blocks, not only those with hung text: a rebuilt message is no stand-in.
    by_block = {(m.role, block_id): at for at, m in enumerate(original) for block_id in _block_ids(m)}
    places: list[int | None] = []
    left: dict[int, str] = {}
    at = 0
    for message in out:
        found = by_identity.get(id(message))
        if found is None:
            handle = source(message)
            found = by_handle.get(handle) if handle is not None else None
        if found is None and _block_ids(message):
            found = by_block.get((message.role, _block_ids(message)[0]))
        elif found is None and message.role == "assistant" and not is_turn_index_line(message.text):
            # A reply whose calls were all dropped: its text, then their marker lines (``replies_after``).
            found = next((i for i in range(at, len(original)) if original[i].role == "assistant"
                          and _rebuilt_from(message, original[i])), None)
            dropped = original[found].handle if found is not None else None
            if dropped is not None and dropped in hung:
                left[id(message)] = hung[dropped]
        name = _cut_prompt_file(message) if found is None and is_prompt(message) else None
        if name is not None:
            # An old prompt cut to its opening, with no hung text of its own: its file names it.
            found = next((i for i in range(at, len(original)) if is_prompt(original[i]) and archive_name(original[i].text) == name),
                         None)
        elif found is None and is_prompt(message):
            found = next((i for i in range(at, len(original)) if is_prompt(original[i]) and same_prompt(original[i], message)),
                         None)
            # Rebuilt, it went out without its handle: the engine no longer writes what hung on it.
            rebuilt = original[found].handle if found is not None else None
            if rebuilt is not None and rebuilt in hung:
                left[id(message)] = hung[rebuilt]
        if found is not None and found < at:
            found = None
        places.append(found)
        if found is not None:
            at = found + 1
    # The walk only moves forward: the sources found rise with their places in ``out``.
    found_at = [k for k, place in enumerate(places) if place is not None]
    sources = [place for place in places if place is not None]
    held = set(sources)
    for gone, message in enumerate(original):
        text = hung.get(message.handle, "") if message.handle is not None else ""
        if not text or gone in held:
            continue
        nearest = bisect_left(sources, gone)
        before = found_at[nearest - 1] if nearest else -1
        after = found_at[nearest] if nearest < len(found_at) else len(out)
        # Between two sources found, every message of ``out`` is one with none: a stand-in.
        target = out[before + 1 if before + 1 < after else max(before, 0)]
        left[id(target)] = left.get(id(target), "") + text
    return left


def _cut_prompt_source(message: SessionMessage, by_file: Mapping[str, str | None]) -> str | None:
    """The handle of the prompt ``message`` was cut from, when its last line is the note of a
    cut prompt (``markers.prompt_note``) naming one of ``by_file``'s files."""
    if not by_file or message.role != "user" or message.toolResults:
        return None
    name = _cut_prompt_file(message)
    return by_file.get(name) if name is not None else None


def _cut_prompt_file(message: SessionMessage) -> str | None:
    """The name of the file holding the prompt ``message`` was cut from, when its last line is
    the note of a cut prompt (``markers.prompt_note``)."""
    last = message.text[message.text.rfind("\n") + 1:]
    path = saved_path(last) if is_prompt_note(last) else None
    return os.path.basename(path) if path is not None else None


def regroup(messages: Sequence[SessionMessage], carried: Callable[[SessionMessage], str] | None = None,
            responses: Sequence[int] | None = None) -> list[SessionMessage]:
    """Merge each turn's fragments and gather its results right after it.

    A turn is a run of assistant messages with no user message between them. The engine rebuilds
    a message as its text, then its calls, so text that followed a call within the turn joins
    the turn's text (prose keeps its order; only its place relative to the calls moves). Each
    result joins the turn holding its call, whatever order the tools finished in, and a result
    message's own text joins the turn of its first result. User messages without results, and
    results whose call is not in the list, stay where they are. ``carried`` names engine text a
    message loses by going back without its handle (:mod:`.meta`); a turn's goes after it, in
    its results message. Messages that need no merging come back as the very same objects.

    ``responses`` number the response of each assistant message (:func:`replies_after` of the
    pass's output and input): fragments of two responses that a dropped call's results no longer
    separate stay two turns (ignored when the counts differ).
    """
    carry = carried or (lambda message: "")
    if responses is not None and len(responses) != sum(m.role == "assistant" for m in messages):
        responses = None
    assistants = 0
    # A turn goes out as soon as it is closed and every call of it has its result, with what
    # came before it: a long session's turns are not all alive at once.
    slots: deque[_Turn | SessionMessage] = deque()
    turn_of: dict[str, _Turn] = {}
    open_turn: _Turn | None = None
    out: list[SessionMessage] = []
    for message in messages:
        if message.role == "assistant":
            if responses is not None:
                assistants += 1
                if assistants > 1 and responses[assistants - 1] != responses[assistants - 2]:
                    open_turn = None
            if open_turn is None:
                open_turn = _Turn([message])
                slots.append(open_turn)
            else:
                open_turn.fragments.append(message)
            open_turn.carried += carry(message)
            for use in message.toolUses:
                turn_of[use.tool_use_id] = open_turn
            open_turn.waiting += len(message.toolUses)
            continue
        open_turn = None
        results = message.toolResults or ()
        # A call's result is homed once (pairing refuses a second result for one call).
        homes = [turn_of.pop(r.tool_use_id, None) for r in results]
        first = next((home for home in homes if home is not None), None)
        if first is None:
            slots.append(message)
            if carry(message):
                slots.append(SessionMessage(role="user", text=carry(message)))
        else:
            strays = [r for r, home in zip(results, homes) if home is None]
            if strays:
                slots.append(SessionMessage(role="user", toolResults=tuple(strays)))
            first.result_sources = _added(first.result_sources, message)
            first.carried += carry(message)
            for result, home in zip(results, homes):
                if home is not None:
                    home.results += (result,)
                    home.waiting -= 1
        while slots and not (isinstance(slots[0], _Turn) and slots[0].waiting):
            _emit(out, slots.popleft())
    while slots:
        _emit(out, slots.popleft())
    return out


def _emit(out: list[SessionMessage], slot: _Turn | SessionMessage) -> None:
    for message in slot.messages() if isinstance(slot, _Turn) else [slot]:
        previous = out[-1] if out else None
        if (previous is not None and previous.role == message.role == "assistant" and not previous.toolUses
                and _marks_only(previous.text)):
            # A turn left with marker lines only (every call of it dropped, its results gone)
            # runs into the next turn, its lines leading the next turn's text. A turn with
            # prose stays its own message: two replies are never one text.
            merged = _merged("assistant", [previous, message], message.toolUses, ())
            out[-1] = merged if merged is not None else message
            continue
        out.append(message)


def _marks_only(text: str) -> bool:
    return all(line.startswith(PREFIX) for line in text.split("\n") if line.strip())


def replies(messages: Sequence[SessionMessage]) -> array[int]:
    """The model response each assistant message is part of (1, 2, ...), in order: a user
    message between two assistant messages starts a new one."""
    out = array("q")
    reply = 0
    after_user = True
    for message in messages:
        if message.role != "assistant":
            after_user = True
            continue
        reply += after_user
        after_user = False
        out.append(reply)
    return out


def replies_after(out: Sequence[SessionMessage], original: Sequence[SessionMessage]) -> array[int]:
    """The response each assistant message of a pass's output ``out`` is part of, numbered as
    :func:`replies` numbers the pass's input ``original``, so turn boundaries follow the messages
    the ladder left (an evicted turn's assistant messages are one index line there).

    The output keeps the input's order, so one walk forward finds each message's source: the
    same object when the pass left it; when it rebuilt it, the input message holding its first
    kept call, or, with no call left, the one whose text it begins with (a dropped call's marker
    lines follow the text). An index line, and a message found nowhere ahead, is a response of
    its own (a negative number): two replies are never taken for one.
    """
    numbers = replies(original)
    sources = [m for m in original if m.role == "assistant"]
    out_numbers = array("q")
    at = 0  # the next input assistant message a source may be
    fresh = 0
    for message in out:
        if message.role != "assistant":
            continue
        found = -1
        if not is_turn_index_line(message.text):
            for position in range(at, len(sources)):
                if _rebuilt_from(message, sources[position]):
                    found = position
                    break
        if found < 0:
            fresh -= 1
            out_numbers.append(fresh)
            continue
        out_numbers.append(numbers[found])
        at = found + 1
    return out_numbers


def _rebuilt_from(message: SessionMessage, source: SessionMessage) -> bool:
    if message is source:
        return True
    if message.toolUses:
        first = message.toolUses[0].tool_use_id
        return any(use.tool_use_id == first for use in source.toolUses)
    text, before = message.text, source.text
    if not before:
        return bool(source.toolUses) and _marks_only(text)
    return text == before or text.startswith(before + "\n")


def _added(items: list[Any] | None, item: Any) -> list[Any]:
    if items is None:
        return [item]
    items.append(item)
    return items


def turn_problems(wired: Iterable[Mapping[str, Any]], original: Sequence[SessionMessage]) -> list[str]:
    """What the engine would have to repair in an answer's message list; empty when nothing.

    ``wired`` is the answer as sent; an entry that is only ``{"handle": h}`` stands for the
    input message with that handle. Every tool_result must sit in the message directly after
    the assistant message holding its tool_use, once; no result may lose a call the input had,
    nor a call its result. Results whose call was absent from the input too are the engine's
    own to drop, and a call the input never answered stays unanswered.

    One pass that keeps ids only: the answer may be a 200k-message session's, read from a
    generator, and neither its entries nor a table of the input are kept; the input is walked
    again only for the few ids left in doubt at the end.
    """
    find = _finder(original)
    calls: dict[str, int] = {}  # each call's message
    answered: set[str] = set()
    twice: list[str] = []
    placed: list[str] = []
    early: list[tuple[str, int, str]] = []  # results met before any message held their call
    for index, entry in enumerate(wired):
        role, uses, results = _shape(entry, find)
        for use_id in uses:
            if use_id in calls:
                twice.append(f"tool call {use_id} appears twice")
            calls[use_id] = index
        for result_id in results:
            if result_id in answered:
                placed.append(f"tool result {result_id} appears twice")
            answered.add(result_id)
            call = calls.get(result_id)
            if call is None:
                early.append((result_id, index, role))
            elif role != "user" or index != call + 1:
                placed.append(f"tool result {result_id} is message {index}, its call is message {call}")
    orphans = [(result_id, index) for result_id, index, _role in early if result_id not in calls]
    input_calls = _ids_in(original, {result_id for result_id, _ in orphans}, results=False)
    placed.extend(f"tool result {result_id} outlives its call" for result_id, _ in orphans if result_id in input_calls)
    placed.extend(
        f"tool result {result_id} is message {index}, its call is message {calls[result_id]}"
        for result_id, index, _role in early
        if result_id in calls
    )
    unanswered = [use_id for use_id in calls if use_id not in answered]
    input_results = _ids_in(original, set(unanswered), results=True)
    lost = [f"tool call {use_id} lost its result" for use_id in unanswered if use_id in input_results]
    return twice + placed + lost


def _finder(original: Sequence[SessionMessage]) -> Callable[[str], SessionMessage | None]:
    """The input message with a handle. An answer keeps the input's order, so a walk forward
    finds each in turn; the input is indexed whole only when one is not ahead of the walk."""
    position = 0
    index: dict[str, SessionMessage] | None = None

    def find(handle: str) -> SessionMessage | None:
        nonlocal position, index
        if index is None:
            while position < len(original):
                message = original[position]
                position += 1
                if message.handle == handle:
                    return message
            index = {m.handle: m for m in original if m.handle is not None}
        return index.get(handle)

    return find


def _ids_in(original: Sequence[SessionMessage], wanted: set[str], *, results: bool) -> set[str]:
    """Which of ``wanted`` the input holds as calls (or as results)."""
    if not wanted:
        return set()
    if results:
        return {r.tool_use_id for m in original for r in m.toolResults or () if r.tool_use_id in wanted}
    return {u.tool_use_id for m in original for u in m.toolUses if u.tool_use_id in wanted}


def _shape(entry: Mapping[str, Any], find: Callable[[str], SessionMessage | None]) -> tuple[str, list[str], list[str]]:
    if set(entry) == {"handle"}:
        message = find(str(entry["handle"]))
        if message is None:
            return "user", [], []
        return message.role, [u.tool_use_id for u in message.toolUses], [r.tool_use_id for r in message.toolResults or []]
    uses = [str(u.get("tool_use_id")) for u in entry.get("toolUses") or []]
    results = [str(r.get("tool_use_id")) for r in entry.get("toolResults") or []]
    return str(entry.get("role")), uses, results
