"""Read conversations from disk or stdin into ``SessionMessage`` lists.

The main input is a Claude Code transcript (JSONL, one record per line). ``load_messages`` also
accepts the other conversation shapes found in the corpus: a ``{"loglines": [...]}`` export, a
JSON list of SessionMessage objects and the lossless-compaction ``[{role, blocks}]`` format.

The output mirrors what Claude Code hands a compaction hook: one message per model turn (the
streamed fragments of one ``message.id`` merged), ``handle`` = record uuid, and every ToolUse
carrying a copy of its outcome.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import TranscriptError
from .messages import (
    BLOCK_FIELDS,
    BLOCK_LAYOUT,
    NO_EXTRA,
    RECORD_FIELDS,
    MessageError,
    SessionMessage,
    ToolResult,
    ToolUse,
    parse_messages,
    shared_input,
)

__all__ = [
    "ACCEPTED_FORMATS",
    "TranscriptError",
    "TranscriptParse",
    "TranscriptStats",
    "load_messages",
    "parse_records",
    "parse_transcript",
    "parse_transcript_with_stats",
    "read_messages",
]

ACCEPTED_FORMATS = (
    "expected a Claude Code transcript (JSONL, one record per line), "
    'a {"loglines": [...]} export of such records, '
    "a JSON list of SessionMessage objects ({role, text, toolUses, toolResults}), "
    "or a JSON list of {role, blocks} conversation messages"
)

# Record types Claude Code writes; any of them marks a JSONL document as a transcript even when
# it holds no conversation yet.
_KNOWN_RECORD_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "attachment",
        "progress",
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "permission-mode",
        "last-prompt",
        "custom-title",
        "ai-title",
        "mode",
        "bridge-session",
    }
)
_CONVERSATION_TYPES = frozenset({"user", "assistant"})


@dataclass
class TranscriptStats:
    """What the reader skipped, so callers can report it instead of losing it silently."""

    lines: int = 0
    """Non-blank lines (or list items) seen."""
    non_object_lines: int = 0
    """Valid JSON that is not an object (a string, number or array)."""
    untyped_records: int = 0
    """Objects without a usable string ``type``."""
    record_types: Counter[str] = field(default_factory=Counter)
    """Every typed record in the input, by type (before any selection)."""
    skipped_types: Counter[str] = field(default_factory=Counter)
    """Live records that are not conversation (attachment, progress, system, ...)."""
    malformed_records: int = 0
    """user/assistant records whose ``message``/``content`` has an unusable shape."""
    conversation: int = 0
    """user/assistant records turned into (part of) a message."""
    sidechain_skipped: int = 0
    compact_boundaries: int = 0
    records_before_boundary: int = 0
    """Records (of any type) left behind by the last compaction."""
    preserved_records: int = 0
    """Pre-boundary records brought back because the boundary lists them as preserved."""
    duplicate_tool_uses: int = 0
    """tool_use blocks dropped because an earlier block already used their id."""
    subagent: bool = False
    """Every conversation record is a sidechain: a subagent transcript."""

    @property
    def recognised(self) -> bool:
        """Whether any record had a type Claude Code writes."""
        return any(t in _KNOWN_RECORD_TYPES for t in self.record_types)


@dataclass
class TranscriptParse:
    messages: list[SessionMessage]
    stats: TranscriptStats


# ---------------------------------------------------------------------------------------------
# Block rendering


def _result_item_text(item: Any) -> str:
    """One item of a tool_result ``content`` list, rendered for a reader (never raises)."""
    if isinstance(item, str):
        return item
    if not isinstance(item, Mapping):
        return "" if item is None else json.dumps(item, ensure_ascii=False)
    kind = item.get("type")
    text = item.get("text")
    if kind == "text":
        return text if isinstance(text, str) else ""
    if kind == "tool_reference":
        name = item.get("tool_name") or item.get("name")
        return f"[tool: {name}]" if isinstance(name, str) else "[tool]"
    if kind == "image":
        source = item.get("source")
        media = source.get("media_type") if isinstance(source, Mapping) else None
        return f"[image: {media}]" if isinstance(media, str) else "[image]"
    if kind == "document":
        title = item.get("title")
        return f"[document: {title}]" if isinstance(title, str) else "[document]"
    if isinstance(text, str):
        return text
    return f"[{kind}]" if isinstance(kind, str) else "[item]"


# The members of a block and the fields of a record that the messages hold in their own fields,
# or that the session file's writer makes for itself (a new session, new ids, its own stamps).
_USE_KEYS = frozenset({"type", "id", "name", "input"})
_TEXT_KEYS = frozenset({"type", "text"})
_RESULT_KEYS = frozenset({"type", "tool_use_id", "content", "is_error"})
_SESSION_FIELDS = frozenset({
    "type", "message", "uuid", "parentUuid", "logicalParentUuid", "timestamp", "sessionId", "cwd",
    "userType", "isSidechain", "version", "gitBranch", "slug", "agentId", "entrypoint", "promptId",
    "teamName", "isMeta", "sourceToolAssistantUUID",
})


def _own_fields(data: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any] | None:
    """The members of ``data`` not in ``known``, or None when it has none."""
    if len(data) <= len(known) and all(key in known for key in data):
        return None
    return {key: value for key, value in data.items() if key not in known}


def _result_extra(block: Mapping[str, Any], raw: Any, record: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """What a result block and its record hold beyond its text and error flag, so that a
    result no pass cuts is written back as it came: its content list as written (tool
    references, images, documents, the items of a text list), its other members, its record's
    fields (``messages.RECORD_FIELDS``)."""
    extra: dict[str, Any] = {}
    if isinstance(raw, list):
        extra["content"] = raw
    own = _own_fields(block, _RESULT_KEYS)
    if "content" in block and raw is not None and not isinstance(raw, (str, list)):
        own = {**(own or {}), "content": raw}
    flag = block.get("is_error")
    if "is_error" in block and not isinstance(flag, bool):
        own = {**(own or {}), "is_error": flag}
    if own:
        extra[BLOCK_FIELDS] = own
    if record:
        extra[RECORD_FIELDS] = record
    return extra or NO_EXTRA


def record_fields(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """A user record's own fields (``toolUseResult``, ...): those that neither the messages nor
    a session file's writer make; None when it has none."""
    return _own_fields(record, _SESSION_FIELDS)


def result_text(content: Any) -> str:
    """A tool_result's content as the text the model reads (a list's items one per line)."""
    return _result_text(content)


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_result_item_text(item) for item in content)
    return _result_item_text(content)


def _as_input(value: Any, shared: dict[Any, Any]) -> dict[str, Any]:
    if isinstance(value, dict):
        return shared_input(value, shared)  # JSON object keys are strings
    # A non-object input (not seen in real files) is kept rather than dropped.
    return {} if value is None else {"value": value}


class _Blocks:
    """What one record's content holds, sorted by kind; a list is made on its first item, and
    ``codes`` (``messages.BLOCK_LAYOUT``'s) keep their order; None for a string content."""

    __slots__ = ("texts", "uses", "results", "extras", "codes")

    def __init__(self) -> None:
        self.texts: list[str] | None = None
        self.uses: list[ToolUse] | None = None
        self.results: list[ToolResult] | None = None
        self.extras: list[Any] | None = None
        self.codes: list[Any] | None = None


Layout = tuple[Any, ...]


def canonical_layout(role: str, text: str, extras: int, uses: int, results: int) -> Layout | None:
    """The blocks in the order a session file writes a message without ``BLOCK_LAYOUT``
    (session_file.py): None for a user message of text alone, written as a string."""
    if role == "assistant":
        return ("x",) * extras + ((len(text),) if text else ()) + ("u",) * uses or (0,)
    if not results and not extras:
        return None
    return ("r",) * results + ("x",) * extras + ((len(text),) if text else ())


def _layout_of(message: SessionMessage) -> Layout | None:
    """The block order ``message`` was read in."""
    stored = message.extra.get(BLOCK_LAYOUT)
    if stored is not None:
        return tuple(stored)
    return canonical_layout(message.role, message.text, len(message.extra.get("extraBlocks") or ()),
                            len(message.toolUses), len(message.toolResults or ()))


def _with_layout(message: SessionMessage, codes: Layout | None) -> SessionMessage:
    """``message`` holding ``codes`` when the writer's own order would not give them back."""
    wanted = canonical_layout(message.role, message.text, len(message.extra.get("extraBlocks") or ()),
                              len(message.toolUses), len(message.toolResults or ()))
    if codes == wanted or codes is None:  # None: a string content, which the writer writes as text
        if BLOCK_LAYOUT not in message.extra:
            return message
        return replace(message, extra={k: v for k, v in message.extra.items() if k != BLOCK_LAYOUT} or NO_EXTRA)
    # A list, as JSON gives it back: a message read again from `--format json` compares equal.
    return replace(message, extra={**message.extra, BLOCK_LAYOUT: list(codes)})


def _append(items: list[Any] | None, item: Any) -> list[Any]:
    if items is None:
        return [item]
    items.append(item)
    return items


@dataclass(slots=True)
class _Held:
    """A result record read before its call, waiting for the record its ``parentUuid`` names."""

    role: str
    handle: str | None
    content: list[Any]
    is_meta: bool
    fields: dict[str, Any] | None  # the record's own fields (record_fields)
    at: int  # how many messages there were when it was read: its place if its parent never comes
    where: str
    order: int  # its rank among held records, in file order


@dataclass(slots=True)
class _Early:
    """A result whose call has not come yet, and where it sits."""

    result: ToolResult
    message: int
    where: str


class _Assembler:
    """Makes the messages as their records come, so that no builder of every message is alive
    beside the messages themselves (a long session's reading would otherwise leave their memory
    behind, unusable by the rest); a call gets the outcome of its result when both have come.

    A later fragment of a model turn (same ``message.id``) replaces the turn's message by one
    holding both, at the turn's first position, which precedes every result of its calls.

    Claude Code 2.1.121 can write a tool_result line before the records of the response that
    made its call, while the ``parentUuid`` chain orders them: such a record is held until the
    record it names as parent is read, and placed after it. A result the chain does not place
    after its call, and a second result for one call, are errors naming the line.
    """

    def __init__(self, stats: TranscriptStats, where: Callable[[Any], str] = str) -> None:
        self.messages: list[SessionMessage] = []
        self.stats = stats
        self._where = where  # a record's place, for errors
        # Each call met so far, by id: its result shares the id string and copies its outcome
        # onto it.
        self._calls: dict[str, ToolUse] = {}
        # The result of each call not met yet, by id, until its call comes (none when the
        # records are in order; at the end, only results whose call never came).
        self._early: dict[str, _Early] = {}
        # Result records read before their call, by the parentUuid they wait for.
        self.held: dict[str, list[_Held]] = {}
        self._held_count = 0
        # Short input values and whole inputs, one each (messages.shared_input).
        self._inputs: dict[Any, Any] = {}
        # message.id -> the turn's position, times two, plus one once a text block has come for
        # it: one small int, not a tuple, per turn.
        self._turns: dict[str, int] = {}

    def add(self, role: str, handle: str | None, content: str | list[Any], is_meta: bool = False,
            message_id: str | None = None, parent: Any = None, place: Any = "?",
            fields: dict[str, Any] | None = None) -> None:
        """``place`` is the record, named in errors by the ``where`` the assembler was made
        with, or its place already named (a string); ``fields`` the record's own fields, which
        its results carry."""
        if role == "user" and isinstance(content, list) and isinstance(parent, str) and self._before_its_call(content):
            self._held_count += 1
            held = _Held(role, handle, content, is_meta, fields, len(self.messages), self._named(place), self._held_count)
            self.held.setdefault(parent, []).append(held)
            return
        turn = self._turns.get(message_id) if message_id is not None else None
        at = len(self.messages) if turn is None else turn // 2
        blocks = self._blocks(content, at, place, fields)
        if turn is not None:
            self._merge(turn, blocks, message_id)  # type: ignore[arg-type]  # not None when turn is not
            return
        if message_id is not None:
            self._turns[message_id] = 2 * at + (blocks.texts is not None)
        message = SessionMessage(
            role=role,  # type: ignore[arg-type]  # only user/assistant records come here
            text="\n\n".join(blocks.texts or ()),
            toolUses=tuple(blocks.uses) if blocks.uses else (),
            toolResults=None if blocks.results is None else tuple(blocks.results),
            handle=handle,
            # A prompt's record fields (isCompactSummary, todos, ...) ride on it; a result's on
            # the result (_blocks).
            extra=_extras(blocks.extras, is_meta, None if blocks.results else fields),
        )
        self.messages.append(_with_layout(message, None if blocks.codes is None else tuple(blocks.codes)))

    def _before_its_call(self, content: list[Any]) -> bool:
        calls = self._calls
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                given = block.get("tool_use_id")
                if isinstance(given, str) and given not in calls:
                    return True
        return False

    def read(self, uuid: str) -> None:
        """A record with ``uuid`` was read: the results held for it as their parent follow it."""
        for held in self.held.pop(uuid, ()):
            self.add(held.role, held.handle, held.content, held.is_meta, place=held.where, fields=held.fields)
            if held.handle is not None:
                self.read(held.handle)

    def _merge(self, turn: int, blocks: _Blocks, message_id: str) -> None:
        at, has_text = divmod(turn, 2)
        old = self.messages[at]
        text = old.text
        if blocks.texts is not None:
            joined = "\n\n".join(blocks.texts)
            text = f"{text}\n\n{joined}" if has_text else joined
            self._turns[message_id] = 2 * at + 1
        extras = old.extra.get("extraBlocks")
        added = blocks.codes if blocks.codes is not None else (len("\n\n".join(blocks.texts or ())),)
        codes = (*(_layout_of(old) or ()), *added)
        merged = replace(
            old,
            text=text,
            toolUses=(*old.toolUses, *blocks.uses) if blocks.uses else old.toolUses,
            toolResults=(*(old.toolResults or ()), *blocks.results) if blocks.results else old.toolResults,
            extra=_extras(extras + blocks.extras if extras and blocks.extras else extras or blocks.extras,
                          old.extra.get("isMeta") is True),
        )
        self.messages[at] = _with_layout(merged, codes)

    def _named(self, place: Any) -> str:
        return place if isinstance(place, str) else self._where(place)

    def _blocks(self, content: str | list[Any], at: int, place: Any, fields: dict[str, Any] | None = None) -> _Blocks:
        """The record's blocks; ``at`` is the message they go to; ``fields`` the record's own
        fields, carried by each of its results (one dict for all)."""
        out = _Blocks()
        if isinstance(content, str):
            out.texts = [content]
            return out
        calls, early = self._calls, self._early
        codes = out.codes = []
        for block in content:
            if isinstance(block, str):
                # Not an API block shape, but it is text: keep it readable.
                out.texts = _append(out.texts, block)
                codes.append(len(block))
                continue
            if not isinstance(block, dict):
                out.extras = _append(out.extras, block)
                codes.append("x")
                continue
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if isinstance(text, str):
                    out.texts = _append(out.texts, text)
                    own = _own_fields(block, _TEXT_KEYS)
                    codes.append(len(text) if own is None else [len(text), own])
                else:
                    out.extras = _append(out.extras, block)
                    codes.append("x")
            elif kind == "tool_use" and isinstance(block.get("id"), str):
                tool_use_id: str = block["id"]
                if tool_use_id in calls:
                    self.stats.duplicate_tool_uses += 1
                    continue
                codes.append("u")
                name = block.get("name")
                own = _own_fields(block, _USE_KEYS)
                use = calls[tool_use_id] = ToolUse(
                    tool_use_id=tool_use_id,
                    # Tool names repeat in every call: one string each (input: shared_input).
                    tool=sys.intern(name) if isinstance(name, str) else "unknown",
                    input=_as_input(block.get("input"), self._inputs),
                    extra=NO_EXTRA if own is None else {BLOCK_FIELDS: own},
                )
                if early:
                    waiting = early.pop(tool_use_id, None)
                    if waiting is not None:
                        if waiting.message < at:
                            raise _out_of_order(waiting.where, tool_use_id, self._named(place))
                        _set_outcome(use, waiting.result)
                out.uses = _append(out.uses, use)
            elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
                given: str = block["tool_use_id"]
                call = calls.get(given)
                raw = block.get("content")
                flag = block.get("is_error")
                result = ToolResult(
                    tool_use_id=given if call is None else call.tool_use_id,
                    text=_result_text(raw),
                    # As written: no flag (None) and false differ on the way back.
                    isError=flag if isinstance(flag, bool) else None,
                    extra=_result_extra(block, raw, fields),
                )
                if call is None:
                    if given in early:
                        raise _second_result(self._named(place), given)
                    early[given] = _Early(result, at, self._named(place))
                elif call.text is None:
                    _set_outcome(call, result)
                else:
                    raise _second_result(self._named(place), given)
                out.results = _append(out.results, result)
                codes.append("r")
            else:
                # thinking, redacted_thinking, image, document, server tools, id-less tool
                # blocks: nothing here may vanish, so later stages get the raw block.
                out.extras = _append(out.extras, block)
                codes.append("x")
        return out

    def finish(self) -> list[SessionMessage]:
        """The messages, each call carrying its result's outcome."""
        self._place_unparented()
        self._turns.clear()
        self._calls.clear()
        self._inputs.clear()
        self._early.clear()
        return self.messages


    def _place_unparented(self) -> None:
        """Held records whose parent never came go where they were read (a result whose call
        is not in the file, after a compact boundary say, is left alone as before)."""
        held = [h for waiting in self.held.values() for h in waiting]
        self.held.clear()
        # Latest first, so that each earlier one's place is still where it was.
        for record in sorted(held, key=lambda h: h.order, reverse=True):
            self.add(record.role, record.handle, record.content, record.is_meta, place=record.where, fields=record.fields)
            message = self.messages.pop()
            for result in message.toolResults or ():
                call = self._calls.get(result.tool_use_id)
                if call is not None and self._message_of(call) >= record.at:
                    raise _out_of_order(record.where, result.tool_use_id, None)
            self.messages.insert(record.at, message)

    def _message_of(self, call: ToolUse) -> int:
        return next(i for i, m in enumerate(self.messages) if any(u is call for u in m.toolUses))


def _out_of_order(where: str, tool_use_id: str, call_where: str | None) -> TranscriptError:
    call = f"its call (at {call_where})" if call_where else "its call"
    return TranscriptError(
        f"{where}: the tool_result for {tool_use_id} comes before {call}, and its parentUuid does not "
        "name a record after the call; the records are out of order: move this line below the "
        "assistant record holding the call, or remove it"
    )


def _second_result(where: str, tool_use_id: str) -> TranscriptError:
    return TranscriptError(
        f"{where}: a second tool_result for {tool_use_id}; a call has one result: remove the repeated line"
    )


def _extras(blocks: list[Any] | None, is_meta: bool, fields: dict[str, Any] | None = None) -> Mapping[str, Any]:
    extras: dict[str, Any] = {}
    if blocks:
        extras["extraBlocks"] = blocks
    if is_meta:
        extras["isMeta"] = True
    if fields:
        extras[RECORD_FIELDS] = fields
    return extras or NO_EXTRA


def _set_outcome(use: ToolUse, result: ToolResult) -> None:
    """Copy the result onto the call, as Claude Code's ToolUseSummary does.

    In place: the call is this reader's own until it returns the messages, and a copy per call
    would leave the first one's memory behind, interleaved with the messages that stay.
    """
    object.__setattr__(use, "text", result.text)
    object.__setattr__(use, "isError", True if result.isError else None)


# ---------------------------------------------------------------------------------------------
# Claude Code records


def _is_boundary(record: Mapping[str, Any]) -> bool:
    return record.get("type") == "system" and record.get("subtype") == "compact_boundary"


def _preserved_uuids(boundary: Mapping[str, Any], before: list[dict[str, Any]]) -> list[str]:
    """Uuids of pre-boundary records that newer builds keep verbatim after the summary."""
    meta = boundary.get("compactMetadata")
    if not isinstance(meta, Mapping):
        return []
    listed = meta.get("preservedMessages")
    if isinstance(listed, Mapping) and isinstance(listed.get("uuids"), list):
        return [u for u in listed["uuids"] if isinstance(u, str)]
    segment = meta.get("preservedSegment")
    if not isinstance(segment, Mapping):
        return []
    head, tail = segment.get("headUuid"), segment.get("tailUuid")
    if not isinstance(head, str) or not isinstance(tail, str):
        return []
    by_uuid = {r["uuid"]: r for r in before if isinstance(r.get("uuid"), str)}
    chain: list[str] = []
    current: Any = tail
    # Walk tail -> head through parentUuid; a broken chain means we cannot trust it.
    while isinstance(current, str) and current in by_uuid and len(chain) <= len(by_uuid):
        chain.append(current)
        if current == head:
            return chain[::-1]
        current = by_uuid[current].get("parentUuid")
    return []


def _live_records(records: list[dict[str, Any]], subagent: bool, stats: TranscriptStats) -> list[dict[str, Any]]:
    """The records after the last compact boundary, plus any preserved segment it names."""
    last = -1
    for index, record in enumerate(records):
        # A main file ignores boundaries of inline sidechains: they compact another context.
        if _is_boundary(record) and (subagent or record.get("isSidechain") is not True):
            stats.compact_boundaries += 1
            last = index
    if last < 0:
        return records
    before, boundary, live = records[:last], records[last], records[last + 1 :]
    stats.records_before_boundary = len(before)
    wanted = _preserved_uuids(boundary, before)
    if not wanted:
        return live
    live_uuids = {r.get("uuid") for r in live}
    wanted_set = {u for u in wanted if u not in live_uuids}
    preserved = [r for r in before if r.get("uuid") in wanted_set]
    if not preserved:
        return live
    stats.preserved_records = len(preserved)
    meta = boundary.get("compactMetadata")
    anchor = None
    if isinstance(meta, Mapping):
        segment = meta.get("preservedSegment") or meta.get("preservedMessages")
        if isinstance(segment, Mapping):
            anchor = segment.get("anchorUuid")
    at = 0
    for index, record in enumerate(live):
        if (anchor is not None and record.get("uuid") == anchor) or (
            anchor is None and record.get("isCompactSummary") is True
        ):
            at = index + 1
            break
    return live[:at] + preserved + live[at:]


def _typed(records: Iterable[Any], stats: TranscriptStats) -> Iterator[dict[str, Any]]:
    """The records that are objects with a string ``type``; the rest only counted."""
    for record in records:
        stats.lines += 1
        if not isinstance(record, dict):
            stats.non_object_lines += 1
            continue
        kind = record.get("type")
        if not isinstance(kind, str) or not kind:
            stats.untyped_records += 1
            continue
        stats.record_types[kind] += 1
        yield record


def parse_records(records: Iterable[Any], source: str = "<records>") -> TranscriptParse:
    """Turn decoded Claude Code records into the live conversation plus stats."""
    stats = TranscriptStats()
    # Each record's line (or item), for errors: the live part is picked from the whole list.
    lines = isinstance(records, _Lines)
    numbers = array("q")
    typed = []
    for record in _typed(records, stats):
        numbers.append(records.number if lines else stats.lines)  # type: ignore[attr-defined]
        typed.append(record)
    conversation = [r for r in typed if r["type"] in _CONVERSATION_TYPES]
    stats.subagent = bool(conversation) and all(r.get("isSidechain") is True for r in conversation)

    def where(record: Any) -> str:  # asked only for an error or a held result: a walk will do
        number = next(n for r, n in zip(typed, numbers) if r is record)
        return f"{source}:{number}" if lines else f"{source}: item {number}"

    return _assemble(_live_records(typed, stats.subagent, stats), stats, where)


class _NotStreamable(Exception):
    """A record that needs the whole transcript at once (a compact boundary, a sidechain)."""


def _streamed_records(records: _Lines) -> TranscriptParse | None:
    """:func:`parse_records` one record at a time, none kept; ``None`` when a compact boundary
    or a sidechain record needs the whole list (the caller then reads it that way)."""
    stats = TranscriptStats()

    def live() -> Iterator[dict[str, Any]]:
        for record in _typed(records, stats):
            if _is_boundary(record) or record.get("isSidechain") is True:
                raise _NotStreamable
            yield record

    try:
        return _assemble(live(), stats, records.where)
    except _NotStreamable:
        return None


@dataclass
class _Plan:
    """What a first reading of a transcript says about its live part."""

    subagent: bool
    boundaries: int
    last_boundary: int  # the index (among typed records) of the last boundary that counts; -1 for none


def _plan(records: Iterable[Any]) -> _Plan | None:
    """Find the live part in one pass keeping only the boundaries; ``None`` when the last one
    keeps a preserved segment (the records before it are then needed: read whole)."""
    probe = TranscriptStats()
    conversation = sidechain_only = 0
    candidates: list[tuple[int, dict[str, Any]]] = []
    for index, record in enumerate(_typed(records, probe)):
        if record["type"] in _CONVERSATION_TYPES:
            conversation += 1
            sidechain_only += record.get("isSidechain") is True
        if _is_boundary(record):
            candidates.append((index, record))
    subagent = conversation > 0 and sidechain_only == conversation
    # A main file ignores boundaries of inline sidechains: they compact another context.
    counted = [(i, r) for i, r in candidates if subagent or r.get("isSidechain") is not True]
    if counted and _keeps_preserved(counted[-1][1]):
        return None
    return _Plan(subagent, len(counted), counted[-1][0] if counted else -1)


def _keeps_preserved(boundary: Mapping[str, Any]) -> bool:
    meta = boundary.get("compactMetadata")
    return isinstance(meta, Mapping) and any(isinstance(meta.get(key), Mapping) for key in ("preservedMessages", "preservedSegment"))


def _planned_records(records: _Lines, plan: _Plan) -> TranscriptParse:
    """:func:`parse_records` one record at a time, the live part found by :func:`_plan`."""
    stats = TranscriptStats(subagent=plan.subagent, compact_boundaries=plan.boundaries)
    if plan.last_boundary >= 0:
        stats.records_before_boundary = plan.last_boundary
    live = (record for index, record in enumerate(_typed(records, stats)) if index > plan.last_boundary)
    return _assemble(live, stats, records.where)


def _assemble(live: Iterable[dict[str, Any]], stats: TranscriptStats, where: Callable[[Any], str]) -> TranscriptParse:
    """The messages of the live records; ``where`` names a record's place in errors."""
    assembler = _Assembler(stats, where)
    for record in live:
        kind = record["type"]
        if kind not in _CONVERSATION_TYPES:
            stats.skipped_types[kind] += 1
        elif record.get("isSidechain") is True and not stats.subagent:
            stats.sidechain_skipped += 1
        else:
            message = record.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, (str, list)):
                stats.conversation += 1
                uuid = record.get("uuid")
                message_id = message.get("id") if kind == "assistant" else None  # type: ignore[union-attr]
                fields = record_fields(record) if kind == "user" else None
                assembler.add(kind, uuid if isinstance(uuid, str) else None, content, record.get("isMeta") is True,
                              message_id if isinstance(message_id, str) else None, record.get("parentUuid"), record,
                              fields)
            else:
                stats.malformed_records += 1
        if assembler.held:  # any record may be the parent a held result waits for
            uuid = record.get("uuid")
            if isinstance(uuid, str):
                assembler.read(uuid)
    return TranscriptParse(assembler.finish(), stats)


class _Lines:
    """The records of JSONL lines, in order; ``number`` is the line of the latest one read."""

    def __init__(self, lines: Iterable[str], source: str) -> None:
        self.lines = lines
        self.source = source
        self.number = 0

    def __iter__(self) -> Iterator[Any]:
        for number, line in enumerate(self.lines, start=1):
            stripped = line.strip()
            if number == 1:
                stripped = stripped.lstrip("\ufeff")
            if not stripped:
                continue
            self.number = number
            try:
                yield json.loads(stripped)
            except json.JSONDecodeError as exc:
                raise TranscriptError(f"{self.source}:{number}: invalid JSON ({exc.msg})") from None

    def where(self, record: Any) -> str:
        """The line being read (the streamed readers ask while it is the current one)."""
        return f"{self.source}:{self.number}"


def parse_transcript_with_stats(lines: Iterable[str], source: str = "<stdin>") -> TranscriptParse:
    """Like ``parse_transcript``, also returning what was skipped."""
    return parse_records(_Lines(lines, source), source)


def parse_transcript(lines: Iterable[str], source: str = "<stdin>") -> list[SessionMessage]:
    """Parse Claude Code transcript JSONL lines into the live conversation."""
    return parse_transcript_with_stats(lines, source).messages


# ---------------------------------------------------------------------------------------------
# Other document shapes


def _parse_blocks_conversation(items: list[dict[str, Any]], source: str) -> list[SessionMessage]:
    """The lossless-compaction ``[{role, blocks}]`` format: calls and results pair by position."""
    pending: list[str] = []  # ids of calls still waiting for a result, oldest first
    calls = 0
    orphans = 0
    assembler = _Assembler(TranscriptStats())
    for number, item in enumerate(items, start=1):
        role = item.get("role")
        blocks = item.get("blocks")
        if role not in _CONVERSATION_TYPES or not isinstance(blocks, list):
            raise TranscriptError(f"{source}: item {number} is not a {{role, blocks}} user/assistant message")
        normalised: list[Any] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                given = block.get("id")
                calls += 1
                # The stable synthetic id depends only on the call's position in the file.
                tool_use_id = given if isinstance(given, str) else f"toolu_pos_{calls}"
                pending.append(tool_use_id)
                block = {**block, "id": tool_use_id}
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                given = block.get("tool_use_id")
                if isinstance(given, str):
                    if given in pending:
                        pending.remove(given)
                    tool_use_id = given
                elif pending:
                    tool_use_id = pending.pop(0)
                else:
                    orphans += 1
                    tool_use_id = f"toolu_pos_orphan_{orphans}"
                content = block.get("content", block.get("text"))
                is_error = block.get("is_error", block.get("isError")) is True
                block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error}
            normalised.append(block)
        assembler.add(role, None, normalised, place=f"{source}: item {number}")
    return assembler.finish()


def _looks_like_session_message(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and "role" in item
        and "content" not in item
        and "blocks" not in item
        and any(key in item for key in ("text", "toolUses", "toolResults"))
    )


def _describe(doc: Any) -> str:
    if isinstance(doc, dict):
        return f"a JSON object with keys {', '.join(sorted(map(str, doc))[:8]) or '(none)'}"
    if isinstance(doc, list):
        first = doc[0]
        if isinstance(first, dict):
            return f"a JSON list whose first item has keys {', '.join(sorted(map(str, first))[:8]) or '(none)'}"
        return f"a JSON list whose first item is a {type(first).__name__}"
    return f"a JSON {type(doc).__name__}"


def _unrecognised(source: str, what: str) -> TranscriptError:
    return TranscriptError(f"{source}: not a recognised conversation format (found {what}); {ACCEPTED_FORMATS}")


def _load_list(doc: list[Any], source: str) -> list[SessionMessage]:
    if not doc:
        return []
    if all(isinstance(i, dict) and "role" in i and "blocks" in i for i in doc):
        return _parse_blocks_conversation(doc, source)
    if all(_looks_like_session_message(i) for i in doc):
        try:
            return parse_messages(doc)
        except MessageError as exc:
            raise TranscriptError(f"{source}: invalid SessionMessage at {exc.location}: {exc.what}") from None
    if all(isinstance(i, dict) and i.get("type") in _KNOWN_RECORD_TYPES for i in doc):
        # A bare array of Claude Code records: the loglines export without its wrapper.
        return parse_records(doc, source).messages
    raise _unrecognised(source, _describe(doc))


def load_messages(text: str, source: str = "<stdin>") -> list[SessionMessage]:
    """Detect the format of a whole document and read its conversation."""
    body = text.lstrip("\ufeff")
    if not body.strip():
        raise TranscriptError(f"{source}: empty document; {ACCEPTED_FORMATS}")
    # Only "\n" ends a JSONL record: str.splitlines would also split on U+2028 and friends,
    # which may sit raw inside JSON strings.
    lines = body.split("\n")
    try:
        doc: Any = json.loads(body)
    except json.JSONDecodeError as whole:
        first = next(line for line in lines if line.strip())
        try:
            json.loads(first)
        except json.JSONDecodeError:
            # The first line is not a record either: report the error of the document as a
            # whole (a broken pretty-printed JSON file), at its own line.
            raise TranscriptError(f"{source}:{whole.lineno}: invalid JSON ({whole.msg})") from None
        return _load_jsonl(lines, source)
    if isinstance(doc, dict):
        loglines = doc.get("loglines")
        if isinstance(loglines, list):
            return parse_records(loglines, source).messages
        if doc.get("type") in _KNOWN_RECORD_TYPES:
            return _load_jsonl(lines, source)  # a one-record transcript
        raise _unrecognised(source, _describe(doc))
    if isinstance(doc, list):
        return _load_list(doc, source)
    raise _unrecognised(source, _describe(doc))


def _load_jsonl(lines: list[str], source: str) -> list[SessionMessage]:
    parsed = parse_transcript_with_stats(lines, source)
    if not parsed.stats.recognised:
        raise TranscriptError(
            f"{source}: JSON lines without any Claude Code record type (user, assistant, system, ...); "
            f"{ACCEPTED_FORMATS}"
        )
    return parsed.messages


def read_messages(path: str | Path, source: str | None = None) -> list[SessionMessage]:
    """Read a conversation file (UTF-8) in any format ``load_messages`` accepts.

    A JSONL transcript is read line by line, keeping no text or record once its message is
    built (a long session's file, lines and records would otherwise all be alive at once);
    every other shape, and a transcript with a compact boundary or sidechain records, is read
    whole. ``source`` names the file in errors (its name by default).
    """
    file = Path(path)
    name = file.name if source is None else source
    streamed = _read_streamed(file, name)
    if streamed is not None:
        return streamed
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    return load_messages(text, source=name)


def _read_streamed(file: Path, name: str | None = None) -> list[SessionMessage] | None:
    """The messages of a JSONL transcript read one line at a time, or ``None`` to read it whole."""
    try:
        with file.open(encoding="utf-8", newline="\n") as handle:
            first = next((line for line in handle if line.strip()), "")
            try:
                head = json.loads(first.strip().lstrip("\ufeff"))
            except json.JSONDecodeError:
                return None
            if not isinstance(head, dict) or head.get("type") not in _KNOWN_RECORD_TYPES:
                return None
            handle.seek(0)
            source = file.name if name is None else name
            parsed = _streamed_records(_Lines(handle, source))
            if parsed is None:
                # Boundaries or sidechains: a first pass finds the live part, a second reads it.
                handle.seek(0)
                plan = _plan(_Lines(handle, source))
                if plan is None:
                    return None
                handle.seek(0)
                parsed = _planned_records(_Lines(handle, source), plan)
    except (OSError, UnicodeDecodeError, TranscriptError):
        return None  # the whole-file reader reports it, in its own words
    if parsed is None or not parsed.stats.recognised:
        return None
    return parsed.messages
