"""The assembler: messages made from records as they come, each call given its result's outcome."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...errors import TranscriptError
from ..messages import BLOCK_FIELDS, NO_EXTRA, RECORD_FIELDS, SessionMessage, ToolResult, ToolUse
from ..stored import StoredJSON
from .blocks import TEXT_KEYS, USE_KEYS, as_input, own_fields, result_extra, result_text
from .layout import layout_of, with_layout
from .stats import TranscriptStats


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
    fields: StoredJSON | None  # the record's own fields (record_fields)
    at: int  # how many messages there were when it was read: its place if its parent never comes
    where: str
    order: int  # its rank among held records, in file order


@dataclass(slots=True)
class _Early:
    """A result whose call has not come yet, and where it sits."""

    result: ToolResult
    message: int
    where: str


class Assembler:
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
            fields: StoredJSON | None = None) -> None:
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
        self.messages.append(with_layout(message, None if blocks.codes is None else tuple(blocks.codes)))

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
        codes = (*(layout_of(old) or ()), *added)
        merged = replace(
            old,
            text=text,
            toolUses=(*old.toolUses, *blocks.uses) if blocks.uses else old.toolUses,
            toolResults=(*(old.toolResults or ()), *blocks.results) if blocks.results else old.toolResults,
            extra=_extras(extras + blocks.extras if extras and blocks.extras else extras or blocks.extras,
                          old.extra.get("isMeta") is True),
        )
        self.messages[at] = with_layout(merged, codes)

    def _named(self, place: Any) -> str:
        return place if isinstance(place, str) else self._where(place)

    def _blocks(self, content: str | list[Any], at: int, place: Any, fields: StoredJSON | None = None) -> _Blocks:
        """The record's blocks; ``at`` is the message they go to; ``fields`` the record's own
        fields, carried by each of its results (one stored value for all)."""
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
                    own = own_fields(block, TEXT_KEYS)
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
                own = own_fields(block, USE_KEYS)
                use = calls[tool_use_id] = ToolUse(
                    tool_use_id=tool_use_id,
                    # Tool names repeat in every call: one string each (input: shared_input).
                    tool=sys.intern(name) if isinstance(name, str) else "unknown",
                    input=as_input(block.get("input"), self._inputs),
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
                    text=result_text(raw),
                    # As written: no flag (None) and false differ on the way back.
                    isError=flag if isinstance(flag, bool) else None,
                    extra=result_extra(block, raw, fields),
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


def _extras(blocks: list[Any] | None, is_meta: bool, fields: StoredJSON | None = None) -> Mapping[str, Any]:
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
