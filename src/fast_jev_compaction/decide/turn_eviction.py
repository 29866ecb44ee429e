"""Rung d of the eviction ladder: the oldest turns move to the archive, one file and one index
line each, until a window's need is met (``ladder.py`` decides when); the turn that meets it goes
only as far as the need, its older part moved and the rest left in place.

A turn is a user prompt (a user message without tool results) and every message after it up to
the next prompt: the assistant's replies, its calls and their results, as the pass left them
(digests and drop markers included). An evicted turn keeps its prompt, the very same object, and
in place of the rest one assistant message, the index line (``markers.turn_index_line``): the
calls made, the files touched, and the archive file that holds the turn. Prompt, index line,
next prompt: roles still alternate, and a call and its result leave together, since a turn is
evicted only when every result in it has its call in it and every call its result (or none
anywhere: a call the user interrupted leaves with its turn).

A turn is taken whole while the need is larger than it; the one the rest of the need falls in
(a long session's turns run to tens of thousands of characters) gives up only its older part,
the shortest that frees that rest, as the turn in flight does at rung e: one file, one index
line after the prompt and the lines of parts moved before, the rest of the turn after it. Moving
the whole turn would free more than the window needs and lose its newer part for nothing
(docs/ARCHITECTURE.md, "Eviction ladder", has the replay's figures).

Never evicted: the last turn (the one in flight), a turn with a message in the pinned recent
window, a turn evicted already (its index line alone), a turn whose eviction frees nothing; nor
the first message's turn while the first message is pinned (until rung e shrinks the pin to the
turn in flight: ``keep_first``).

Rung e, once d has gone as far as it can (:func:`evict_in_flight`): a long turn in flight (one
prompt, hundreds of calls) holds most of a long session, and no old turn is left to evict. Its
older part goes the same way, oldest first and only as far as the need: one file, one index line
after the prompt (and after the index lines of parts evicted before), its last exchange (the
calls made last, their results and what follows) staying in place. Then the index lines of old
turns, hundreds in a very long session, shrink to the file they name, oldest first
(:func:`shorten_index_lines`); and last, the prompts of old turns, a pasted log or spec of
tens of thousands of characters, keep their opening and a note naming the file that holds
them whole (:func:`shorten_old_prompts`). After the turn in flight's older part, what is left
before that turn (prompts, index lines) may go to one file and one note (:func:`fold_old_turns`).
The user's last prompt, and the turn in flight, stay whole; a last prompt that is a ``!``
command's output is the command's words, not the user's, and is cut as an output would be when
it cannot fit whole (:func:`cut_command_output`, taken first by the ladder).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..conversation.lexicon import EDIT, READ, call_shape
from ..conversation.messages import SessionMessage
from ..conversation.pairing import ToolCall, pinned_positions
from ..conversation.sizes import message_chars
from ..textutil import js_json
from .archive import archive_path
from .digest import DigestShape
from .markers import (
    carries_mark,
    fold_note,
    is_fold_note,
    is_turn_index_line,
    prompt_note,
    saved_path,
    short_index_line,
    turn_index_line,
    without_lead_note,
)
from .rebuild import cut_output


def is_prompt(message: SessionMessage) -> bool:
    """A user message that is not tool results: what starts a turn."""
    return message.role == "user" and not message.toolResults


def prompt_positions(messages: Sequence[SessionMessage]) -> list[int]:
    return [index for index, message in enumerate(messages) if is_prompt(message)]


def in_flight_preserve(messages: Sequence[SessionMessage], preserve: int) -> int:
    """Widen the recent-message window so a trailing tool exchange stays verbatim.

    Auto compaction can fire mid-turn, after a tool_result and before the model has read it.
    Dropping or truncating that pair would make the model ask for the tool again, so every
    message from the assistant message holding the trailing calls to the end is pinned.
    """
    if not messages:
        return preserve
    # Parallel calls come as one message per call and per result: the whole trailing run counts.
    trailing_ids: set[str] = set()
    role = messages[-1].role
    for message in reversed(messages):
        blocks = message.toolResults if role == "user" else message.toolUses
        if message.role != role or not blocks:
            break
        trailing_ids.update(b.tool_use_id for b in blocks)
    if not trailing_ids:
        return preserve
    first = len(messages) - 1
    for index in range(len(messages) - 1, -1, -1):
        if any(u.tool_use_id in trailing_ids for u in messages[index].toolUses):
            first = min(first, index)
    return max(preserve, len(messages) - first)


def has_old_turn(messages: Sequence[SessionMessage], preserve_recent_messages: int) -> bool:
    """Whether rung d may find a turn to move out: one that ends before the pinned recent window
    and is not the first message's (the shape only; a turn that frees nothing may still stay)."""
    prompts = prompt_positions(messages)
    pin_start = len(messages) - preserve_recent_messages
    return any(prompts[k] != 0 and prompts[k + 1] <= pin_start for k in range(len(prompts) - 1))


def last_prompt_chars(messages: Sequence[SessionMessage]) -> int:
    """The characters of the user's last prompt, which every pass keeps whole (0: none)."""
    return next((message_chars(m) for m in reversed(messages) if is_prompt(m)), 0)


def in_flight_chars(messages: Sequence[SessionMessage]) -> int:
    """The characters of the last prompt and what follows it (the turn in flight), or of every
    message when none is a prompt: what the ladder keeps of them after a pass is what it may not
    take (the user's last prompt, the turn's last exchange), so a context whose turn in flight
    alone is over its target cannot be brought under it."""
    prompts = prompt_positions(messages)
    start = prompts[-1] if prompts else 0
    return sum(message_chars(message) for message in messages[start:])


def least_chars(messages: Sequence[SessionMessage], archive_dir: str) -> int:
    """The fewest characters the ladder can bring ``messages`` to without cutting into the turn in
    flight (:func:`in_flight_chars`): that turn, and what precedes it as it is or as the one note
    that would stand for it (:func:`fold_old_turns`), whichever is fewer. A context over its target
    at this floor cannot be brought under it while every cut keeps a marker naming its file."""
    prompts = prompt_positions(messages)
    if len(prompts) < 2:
        return sum(message_chars(message) for message in messages)
    before = messages[: prompts[-1]]
    chars = sum(message_chars(message) for message in before)
    count = sum(1 for message in before if is_prompt(message))
    note = fold_note(count, chars, archive_path(archive_dir, ""))
    return in_flight_chars(messages) + min(chars, len(note))


@dataclass(frozen=True, slots=True)
class EvictedTurn:
    """One turn moved to the archive: the calls it held (pairing's, dropped ones included), its
    file and the characters its eviction freed."""

    calls: tuple[ToolCall, ...]
    path: str
    freed: int
    part: bool = False  # the older part of the turn in flight, not a whole turn
    folded: int = 0  # the prompts of the conversation before the turn in flight it holds (fold_old_turns)


@dataclass(frozen=True)
class Eviction:
    messages: list[SessionMessage]
    turns: list[EvictedTurn]
    # path -> the turn's rendering, one file per evicted turn.
    archive: dict[str, str]

    @property
    def freed(self) -> int:
        return sum(turn.freed for turn in self.turns)


def evict_turns(
    source: Sequence[SessionMessage],
    rebuilt: Sequence[SessionMessage],
    calls: Sequence[ToolCall],
    preserve_recent_messages: int,
    need: float,
    archive_dir: str,
    *,
    keep_first: bool = True,
) -> Eviction:
    """Evict the oldest turns of ``rebuilt`` until ``need`` characters are freed (or none is left).

    ``rebuilt`` is what a pass made of ``source``, ``calls`` its pairing of ``source`` (with
    ``preserve_recent_messages``, the pin). A pass hands back every prompt as the very same
    object, in order, so a turn of one is a turn of the other: the pin and the calls (those a
    drop took out of ``rebuilt`` too) are read on ``source``, the text to move on ``rebuilt``.
    """
    source_prompts = prompt_positions(source)
    prompts = _same_prompts(source, source_prompts, rebuilt)
    pinned = pinned_positions(len(source), preserve_recent_messages)
    pin_start = pinned[1] if len(pinned) > 1 else len(source)
    calls_by_turn: list[list[ToolCall]] = [[] for _ in source_prompts]
    for call in calls:
        turn = bisect_right(source_prompts, call.call_index) - 1
        if turn >= 0:
            calls_by_turn[turn].append(call)

    answered = _answered(rebuilt)
    by_id = {call.tool_use_id: call for call in calls}
    turns: list[EvictedTurn] = []
    archive: dict[str, str] = {}
    # prompt position in ``rebuilt`` -> the index line and the span of ``rebuilt`` it stands for
    replaced: dict[int, tuple[SessionMessage, int, int]] = {}
    freed = 0
    # The last turn is the one in flight; the first message's turn starts at 0.
    for k in range(len(prompts) - 1):
        if freed >= need:
            break
        if (keep_first and source_prompts[k] == 0) or source_prompts[k + 1] > pin_start:
            continue
        body = rebuilt[prompts[k] + 1 : prompts[k + 1]]
        if not body or not _closed(body, answered) or (len(body) == 1 and is_turn_index_line(body[0].text)):
            continue
        turn_chars = sum(message_chars(message) for message in body)
        if turn_chars > need - freed:
            # The rest of the need falls in this turn: its older part, when one frees it, and
            # the rest of the turn (at least its last message) stays.
            start = _past_part_lines(rebuilt, prompts[k] + 1)
            part = _older_part(rebuilt, prompts[k], start, prompts[k + 1] - 1, by_id, need - freed, archive_dir)
            if part is not None:
                line, end, evicted, text = part
                turns.append(evicted)
                archive[evicted.path] = text
                replaced[prompts[k]] = (line, start, end + 1)
                freed += evicted.freed
                continue
        text = render_turn(rebuilt[prompts[k]], body)
        path = archive_path(archive_dir, text)
        index = SessionMessage(
            role="assistant", text=turn_index_line(_tools(calls_by_turn[k]), _files(calls_by_turn[k]), turn_chars, path)
        )
        gained = turn_chars - message_chars(index)
        if gained <= 0:
            continue
        turns.append(EvictedTurn(tuple(calls_by_turn[k]), path, gained))
        archive[path] = text
        replaced[prompts[k]] = (index, prompts[k] + 1, prompts[k + 1])
        freed += gained
    if not turns:
        return Eviction(list(rebuilt), [], {})
    out: list[SessionMessage] = []
    kept_from = 0
    for at in prompts:
        got = replaced.get(at)
        if got is not None:
            line, start, end = got
            out.extend(rebuilt[kept_from:start])
            out.append(line)
            kept_from = end
    out.extend(rebuilt[kept_from:])
    return Eviction(out, turns, archive)


def evict_in_flight(
    messages: Sequence[SessionMessage], calls: Sequence[ToolCall], preserve_recent_messages: int, need: float,
    archive_dir: str,
) -> Eviction:
    """Evict the older part of the turn in flight in ``messages`` until ``need`` characters are
    freed, or up to its last exchange or the pinned recent window, whichever comes first.
    ``calls`` name the calls by id (a pairing of ``messages`` or of what they were rebuilt from).
    The part ends where each call in it has its result in it."""
    prompts = prompt_positions(messages)
    if need <= 0 or not prompts:
        return Eviction(list(messages), [], {})
    start = _past_part_lines(messages, prompts[-1] + 1)
    limit = min(len(messages) - preserve_recent_messages, _last_exchange(messages, start))
    by_id = {call.tool_use_id: call for call in calls}
    part = _older_part(messages, prompts[-1], start, limit, by_id, need, archive_dir, or_longest=True)
    if part is None:
        return Eviction(list(messages), [], {})
    line, end, evicted, text = part
    return Eviction([*messages[:start], line, *messages[end + 1 :]], [evicted], {evicted.path: text})


def _past_part_lines(messages: Sequence[SessionMessage], start: int) -> int:
    """Past the index lines of parts of a turn moved before, from ``start``: a new part starts
    after them and its line joins them. Not past one the hook merged with the next reply's calls
    (``hook.turns.regroup``): those calls and their results stay or go together."""
    while start < len(messages) and is_turn_index_line(messages[start].text) and not messages[start].toolUses:
        start += 1
    return start


def _older_part(
    messages: Sequence[SessionMessage], prompt: int, start: int, limit: int, by_id: dict[str, ToolCall], need: float,
    archive_dir: str, *, or_longest: bool = False,
) -> tuple[SessionMessage, int, EvictedTurn, str] | None:
    """The shortest part ``messages[start:end + 1]`` of the turn of the prompt at ``prompt``,
    ending before ``limit`` where each call in it has its result in it, whose move to the archive
    frees ``need`` (its index line counted); with ``or_longest``, else the longest such part that
    frees anything. Its index line, ``end``, the part as evicted and the file's text; or None."""
    open_calls: set[str] = set()
    closed: list[tuple[int, int]] = []  # (end, chars) where each call in the part has its result in it
    chars = 0
    for end in range(start, limit):
        open_calls.update(use.tool_use_id for use in messages[end].toolUses)
        open_calls.difference_update(result.tool_use_id for result in messages[end].toolResults or ())
        chars += message_chars(messages[end])
        if not open_calls:
            closed.append((end, chars))
    for end, chars in closed:
        last = or_longest and end == closed[-1][0]
        if chars < need and not last:
            continue
        part = messages[start : end + 1]
        moved = tuple(by_id[use.tool_use_id] for m in part for use in m.toolUses if use.tool_use_id in by_id)
        text = render_turn(messages[prompt], part)
        path = archive_path(archive_dir, text)
        line = SessionMessage(role="assistant", text=turn_index_line(_tools(moved), _files(moved), chars, path, part=True))
        gained = chars - message_chars(line)
        if gained >= need or (gained > 0 and last):
            return line, end, EvictedTurn(moved, path, gained, part=True), text
    return None


def shorten_index_lines(messages: Sequence[SessionMessage], need: float) -> tuple[list[SessionMessage], int]:
    """The index lines of whole turns, oldest first, without their calls, files and size
    (``markers.short_index_line``) until ``need`` characters are freed; the messages and what
    that freed. A line of a part of the turn in flight (the rest of the turn follows it) stays."""
    out = list(messages)
    freed = 0
    for at, message in enumerate(messages):
        if freed >= need:
            break
        whole_turn = at + 1 == len(messages) or is_prompt(messages[at + 1])
        path = saved_path(message.text) if whole_turn and is_turn_index_line(message.text) else None
        if path is None:
            continue
        short = SessionMessage(role="assistant", text=short_index_line(path))
        gained = message_chars(message) - message_chars(short)
        if gained > 0:
            out[at] = short
            freed += gained
    return out, freed


# What an old prompt keeps of its opening when it shrinks: a few hundred characters say what was
# asked; the rest is in the archive.
PROMPT_HEAD_CHARS = 300
# Extras that name the engine's record: a shortened prompt is a new record.
_RECORD_IDS = frozenset({"uuid", "handle"})


def shorten_old_prompts(
    messages: Sequence[SessionMessage], need: float, archive_dir: str
) -> tuple[list[SessionMessage], int, dict[str, str]]:
    """The prompts of old turns (evicted ones, or ones the user ended without a reply: a pasted
    log, a ``!`` command's output), oldest first, cut to their first ``PROMPT_HEAD_CHARS`` characters and a note naming the file that holds the prompt
    whole (``markers.prompt_note``), until ``need`` characters are freed; the messages, what that
    freed and the files (path -> prompt). The last prompt is never cut: it starts the turn in
    flight, and the user's latest words stay whole."""
    prompts = prompt_positions(messages)
    out = list(messages)
    freed = 0
    files: dict[str, str] = {}
    for at in prompts[:-1]:
        if freed >= need:
            break
        prompt = messages[at]
        path = archive_path(archive_dir, prompt.text)
        # The lead line the engine joined to the first prompt is not the user's opening: it stays
        # whole, and the user's own opening after it.
        own = without_lead_note(prompt.text)
        lead = prompt.text[: len(prompt.text) - len(own)]
        text = f"{lead}{own[:PROMPT_HEAD_CHARS]}\n{prompt_note(len(prompt.text), path)}"
        gained = len(prompt.text) - len(text)
        # The user's own words go only when most of them leave: a prompt barely past its opening
        # would trade them for a few characters (and a rewritten history, for nothing).
        if gained < len(text):
            continue
        extra = {key: value for key, value in prompt.extra.items() if key not in _RECORD_IDS}
        out[at] = replace(prompt, text=text, handle=None, extra=extra)
        files[path] = prompt.text
        freed += gained
    return out, freed, files


# Claude Code records the output of a ``!`` command (and of a local slash command) as a user
# message of its own, after the one holding the command: a prompt by its shape, but the command's
# words, not the user's.
_COMMAND_OUTPUT = re.compile(r"\s*<(?:bash-stdout|local-command-stdout)>")


def is_command_output(message: SessionMessage) -> bool:
    """Whether ``message`` is a ``!`` command's (or a local command's) output, not the user's words."""
    return is_prompt(message) and _COMMAND_OUTPUT.match(message.text) is not None


def cut_command_output(
    messages: Sequence[SessionMessage], need: float, shape: DigestShape, archive_dir: str
) -> tuple[list[SessionMessage], int, dict[str, str]]:
    """The last prompt, when it is a command's output (:func:`is_command_output`: a test run's
    50,000 characters the user printed with ``!``), cut as a tool's output is: its digest (its
    opening, closing and key lines, a failing run's failures) and the note naming the file that
    holds it whole (``rebuild.cut_output``). The messages, what that freed and the file; nothing
    when ``need`` is met already or the cut would not pay. The user's own last prompt is never cut."""
    prompts = prompt_positions(messages)
    # One cut before is enough: its digest and note are what a later pass finds.
    if need <= 0 or not prompts or not is_command_output(messages[prompts[-1]]) or carries_mark(messages[prompts[-1]].text):
        return list(messages), 0, {}
    at = prompts[-1]
    output = messages[at]
    path = archive_path(archive_dir, output.text)
    # The opening tag stays, so the message still reads as the command's output.
    tag = _COMMAND_OUTPUT.match(output.text)
    assert tag is not None
    body = cut_output(output.text[tag.end() :], False, shape, path)
    if body is None:
        return list(messages), 0, {}
    text = output.text[: tag.end()] + body
    extra = {key: value for key, value in output.extra.items() if key not in _RECORD_IDS}
    out = list(messages)
    out[at] = replace(output, text=text, handle=None, extra=extra)
    return out, len(output.text) - len(text), {path: output.text}


def fold_old_turns(
    messages: Sequence[SessionMessage], calls: Sequence[ToolCall], preserve_recent_messages: int, need: float,
    archive_dir: str, saved: Callable[[str], str | None] = lambda path: None,
) -> Eviction:
    """The conversation before the turn in flight, oldest first and only as far as ``need``, moved
    to one file, one note (``markers.fold_note``, a user message) in its place: what is left of
    old turns once their index lines and prompts have shrunk (prompts, index lines, turns that
    could not go alone). A fold ends where a prompt starts, never in the pinned recent window nor
    past the last prompt, and only where each result in it has its call in it and each call its
    result (or none anywhere); it is taken only when it frees more than its note costs. An earlier
    fold note in the run gives way to the file it names, when ``saved`` (path -> text) reads it,
    so one file holds the whole earlier conversation. ``calls`` name the calls by id."""
    prompts = prompt_positions(messages)
    if need <= 0 or len(prompts) < 2:
        return Eviction(list(messages), [], {})
    answered = _answered(messages)
    limit = min(prompts[-1], len(messages) - preserve_recent_messages)
    by_id = {call.tool_use_id: call for call in calls}
    chosen: tuple[int, int, str, str, SessionMessage, int] | None = None
    for end in prompts[1:]:
        if end > limit:
            break
        run = messages[:end]
        if not _closed(run, answered):
            continue
        text = _fold_text(run, saved)
        path = archive_path(archive_dir, text)
        count = sum(1 for message in run if is_prompt(message) and not is_fold_note(message.text))
        count += sum(_fold_count(message.text) for message in run if is_fold_note(message.text))
        chars = sum(message_chars(message) for message in run)
        note = SessionMessage(role="user", text=fold_note(count, chars, path))
        gained = chars - message_chars(note)
        if gained > 0:
            chosen = (end, gained, path, text, note, count)
            if gained >= need:
                break
    if chosen is None:
        return Eviction(list(messages), [], {})
    end, gained, path, text, note, count = chosen
    moved = tuple(by_id[use.tool_use_id] for m in messages[:end] for use in m.toolUses if use.tool_use_id in by_id)
    return Eviction([note, *messages[end:]], [EvictedTurn(moved, path, gained, folded=count)], {path: text})


def _fold_count(text: str) -> int:
    """The prompts an earlier fold note says it holds."""
    match = _FOLD_PROMPTS.search(text)
    return int(match.group(1).replace(",", "")) if match else 0


_FOLD_PROMPTS = re.compile(r"before this point \(([\d,]+) prompt\(s\)")


def _fold_text(run: Sequence[SessionMessage], saved: Callable[[str], str | None]) -> str:
    """The folded conversation as the archive holds it: each prompt, reply, call and output under
    a heading line (:func:`render_turn`'s), an earlier fold's file inlined when it can be read."""
    parts: list[str] = []
    at = 0
    while at < len(run):
        message = run[at]
        if is_fold_note(message.text):
            path = saved_path(message.text)
            earlier = saved(path) if path is not None else None
            parts.append(earlier.rstrip("\n") if earlier is not None else f"## the earlier conversation\n{message.text}")
            at += 1
            continue
        end = at + 1
        while end < len(run) and not is_prompt(run[end]):
            end += 1
        if is_prompt(message):
            parts.append(render_turn(message, run[at + 1 : end]).rstrip("\n"))
        else:
            parts.extend(_rendered(run[at:end]))
        at = end
    return "\n\n".join(parts) + "\n"


def _last_exchange(messages: Sequence[SessionMessage], start: int) -> int:
    """Where the last exchange of the turn from ``start`` begins: the last run of assistant
    messages holding calls (parallel calls come one a message), else its last message."""
    at = len(messages) - 1
    while at >= start and not messages[at].toolUses:
        at -= 1
    if at < start:
        return len(messages) - 1
    while at - 1 >= start and messages[at - 1].role == "assistant" and messages[at - 1].toolUses:
        at -= 1
    return at


def _same_prompts(source: Sequence[SessionMessage], source_prompts: list[int], rebuilt: Sequence[SessionMessage]) -> list[int]:
    """Where ``source``'s prompts are in ``rebuilt``. By identity, not by shape: a result message
    with text whose results were all dropped comes back as text alone, yet starts no turn. A
    prompt the pass rebuilt (an attached image moved by rung c) is a new object with the same
    text: it is the same prompt."""
    found: list[int] = []
    for index, message in enumerate(rebuilt):
        if len(found) < len(source_prompts) and same_prompt(source[source_prompts[len(found)]], message):
            found.append(index)
    if len(found) != len(source_prompts):
        raise ValueError("a pass rewrote or removed a user prompt")
    return found


def same_prompt(prompt: SessionMessage, message: SessionMessage) -> bool:
    if message is prompt:
        return True
    # The rebuild may give a changed message no handle (its record ids name the original).
    return (
        message.role == prompt.role and message.text == prompt.text and message.handle in (prompt.handle, None)
        and not message.toolUses and not message.toolResults
    )


def _answered(messages: Sequence[SessionMessage]) -> set[str]:
    """The ids of the calls that have a result in ``messages``."""
    return {result.tool_use_id for message in messages for result in message.toolResults or ()}


def _closed(body: Sequence[SessionMessage], answered: set[str]) -> bool:
    """Whether every result in ``body`` has its call in it, and every call in it its result, or
    none anywhere (``answered``: the calls answered in the whole history): a call the user
    interrupted was never answered, and leaves with its turn without parting a pair."""
    uses = {use.tool_use_id for message in body for use in message.toolUses}
    results = {result.tool_use_id for message in body for result in message.toolResults or ()}
    return results <= uses and not (uses - results) & answered


def _tools(calls: Sequence[ToolCall]) -> list[tuple[str, int]]:
    """(tool, count) in order of first use."""
    counts: dict[str, int] = {}
    for call in calls:
        counts[call.tool] = counts.get(call.tool, 0) + 1
    return list(counts.items())


def _files(calls: Sequence[ToolCall]) -> list[str]:
    """The files the calls read or edited, each once, in order of first use."""
    files: dict[str, None] = {}
    for call in calls:
        shape = call_shape(call.tool, call.input)
        if shape.kind in (READ, EDIT) and shape.file:
            files.setdefault(shape.file)
    return list(files)


def render_turn(prompt: SessionMessage, body: Sequence[SessionMessage]) -> str:
    """A turn as the archive holds it, plain text the Read tool shows: the prompt, then each
    reply, call (tool, id, input as JSON) and output in order, under a heading line each."""
    return "\n\n".join([f"## the user's prompt\n{prompt.text}", *_rendered(body)]) + "\n"


def _rendered(body: Sequence[SessionMessage]) -> list[str]:
    """Each reply, call and output of ``body`` under its heading line."""
    names = {use.tool_use_id: use.tool for message in body for use in message.toolUses}
    parts: list[str] = []
    for message in body:
        if message.text:
            parts.append(f"## {'the assistant' if message.role == 'assistant' else 'a user message'}\n{message.text}")
        for use in message.toolUses:
            parts.append(f"## {use.tool} call {use.tool_use_id}\n{js_json(use.input)}")
        for result in message.toolResults or ():
            error = " (an error)" if result.isError else ""
            parts.append(f"## output of {names.get(result.tool_use_id, 'the')} call {result.tool_use_id}{error}\n{result.text}")
    return parts
