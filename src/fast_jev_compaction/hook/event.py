"""The one JSON document the mod writes to the entry's stdin (docs/ARCHITECTURE.md, hook protocol).

Read as it is decoded: the top-level object member by member and the ``messages`` array one
message at a time, each checked and built before the next is decoded, from a window of text
refilled from stdin as it empties, so a large event is never alive whole, as text or as JSON
objects, and its text never beside its messages. The checks are pydantic's: each message by
``messages.message_from_wire``, the other members by :data:`HEADER_ADAPTER`; a bad event is a
:class:`MessageError` naming the field.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from json.decoder import JSONDecodeError
from typing import Any, Callable, Mapping, Protocol

from pydantic import TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, TypedDict

from ..conversation.messages import (
    WIRE_CONFIG,
    MessageError,
    SessionMessage,
    SessionMessageWire,
    Shared,
    message_from_wire,
    parse_messages,
)

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# The stdlib's own string scanner (C), the one json.loads uses; not in the typeshed stubs.
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
# Text asked of the source at a time; an item longer than the window doubles it.
_WINDOW = 1 << 16


class TextSource(Protocol):
    """Where the event's text comes from (``hook.stdin.StdinText``): ``read(least)`` gives at
    least ``least`` more characters, fewer only at the end, ``""`` after it."""

    def read(self, least: int) -> str: ...


@dataclass
class HookEvent:
    """``session.compact`` as the mod forwards it, plus the context the child cannot look up.

    A ``$.process.run`` child does not inherit the plugin's root, data folder, session id or
    options, so the mod passes them here. Unknown members are kept in ``extra``: a newer mod may
    send more.
    """

    messages: list[SessionMessage]
    event: str = "session.compact"
    # Kept as free text: an engine that adds a trigger should still get a compaction.
    trigger: str = "manual"
    instructions: str | None = None
    agentId: str | None = None
    sessionId: str | None = None
    pluginRoot: str | None = None
    pluginData: str | None = None
    cwd: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # ``$.session.usage().context`` before the compaction: {tokens, window, percent}, when known.
    context: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_precompute(self) -> bool:
        return self.trigger == "precompute"


@with_config(WIRE_CONFIG)
class EventHeader(TypedDict):
    """The event's members other than ``messages``, as the mod writes them. ``event``, ``trigger``
    and ``options`` may be left out but not null; the others may be null (taken as absent)."""

    event: NotRequired[str]
    trigger: NotRequired[str]
    instructions: NotRequired[str | None]
    agentId: NotRequired[str | None]
    sessionId: NotRequired[str | None]
    pluginRoot: NotRequired[str | None]
    pluginData: NotRequired[str | None]
    cwd: NotRequired[str | None]
    options: NotRequired[dict[str, Any]]
    context: NotRequired[dict[str, Any] | None]


# Read in two parts, the header by HEADER_ADAPTER and the messages one at a time by
# messages.message_from_wire, so this shape is never validated whole: it is what
# schemas/hook-event.schema.json publishes.
@with_config(WIRE_CONFIG)
class HookEventWire(EventHeader):
    """The session.compact document the plugin's mod writes to the Python hook's stdin: the
    event's members, the context the child cannot look up, and the messages."""

    messages: list[SessionMessageWire]


HEADER_ADAPTER: TypeAdapter[EventHeader] = TypeAdapter(EventHeader)
_FIELDS = frozenset(EventHeader.__annotations__)


def _event(fields: Mapping[str, Any], messages: list[SessionMessage]) -> HookEvent:
    """The event from its checked messages and its other members, validated here."""
    header = {key: value for key, value in fields.items() if key != "messages"}
    try:
        checked = HEADER_ADAPTER.validate_python(header)
    except ValidationError as exc:
        raise MessageError.first_of(exc) from None
    values: dict[str, Any] = {name: value for name, value in checked.items() if name in _FIELDS and value is not None}
    extra = {key: value for key, value in checked.items() if key not in _FIELDS}
    return HookEvent(messages=messages, extra=extra, **values)


def read_event(document: Any) -> HookEvent:
    """Check a decoded event (a dict) and build it."""
    if not isinstance(document, dict):
        raise MessageError(("event",), "Input should be a valid dictionary")
    if "messages" not in document:
        raise MessageError(("messages",), "Field required")
    try:
        messages = parse_messages(document["messages"])
    except MessageError as exc:
        raise exc.under("messages") from None
    return _event(document, messages)


def parse_event(source: str | TextSource, on_header: Callable[[dict[str, Any]], None] | None = None) -> HookEvent:
    """:func:`_parse_event`; JSON nested past the decoder's recursion limit is bad input, as a
    :class:`MessageError`, not a failure of the hook's own."""
    try:
        return _parse_event(source, on_header)
    except RecursionError:
        raise MessageError(
            ("event",), f"its JSON nests deeper than the {sys.getrecursionlimit():,} levels a decoder reads"
        ) from None


def _parse_event(source: str | TextSource, on_header: Callable[[dict[str, Any]], None] | None = None) -> HookEvent:
    """Decode and check the event's text as one pass; ``on_header`` gets the members before ``messages``.

    ``source`` is the whole text or a :class:`TextSource` read as the walk goes. ``on_header``
    lets the caller learn the data folder and the options (the mod sends them first) before the
    messages, the long part, are read. Errors come as ``json.loads`` gives them
    (:class:`json.JSONDecodeError`, the syntax first, its line and column the document's) or as
    a :class:`MessageError`.
    """
    text = _Window(source)
    if text.peek() != "{":
        return read_event(json.loads(text.rest()))  # not an object: the stdlib's error, or the check's
    fields: dict[str, Any] = {}
    messages: list[SessionMessage] | None = None
    problem: MessageError | None = None
    text.at += 1
    if text.peek() == "}":
        text.at += 1
    else:
        while True:
            if text.peek() != '"':
                raise text.error("Expecting property name enclosed in double quotes")
            key = text.decode(_key)
            if text.peek() != ":":
                raise text.error("Expecting ':' delimiter")
            text.at += 1
            if text.peek() == "[" and key == "messages":
                if on_header is not None:
                    on_header(fields)
                    on_header = None
                messages, problem = _messages(text)
                fields.pop("messages", None)  # a repeated member: the last one counts, as in json.loads
            else:
                fields[key] = text.decode(_DECODER.raw_decode)
                if key == "messages":
                    messages, problem = None, None
            if not text.more_after_value("}"):
                break
    if text.peek():
        raise text.error("Extra data")
    if on_header is not None:
        on_header(fields)
    if problem is not None:
        raise problem
    if messages is None:
        return read_event(fields)  # no messages array: the check says what is wrong
    return _event(fields, messages)


def _key(text: str, at: int) -> tuple[str, int]:
    return _scanstring(text, at + 1)


def _messages(text: _Window) -> tuple[list[SessionMessage], MessageError | None]:
    """The array at ``[``, message by message; after a bad one the rest is only decoded."""
    out: list[SessionMessage] = []
    problem: MessageError | None = None
    text.at += 1
    if text.peek() == "]":
        text.at += 1
        return out, None
    index = 0
    shared = Shared()
    while True:
        item = text.decode(_DECODER.raw_decode)
        if problem is None:
            try:
                out.append(message_from_wire(item, shared))
            except MessageError as exc:
                problem = exc.under("messages", index)
        del item
        index += 1
        if not text.more_after_value("]"):
            return out, problem


class _Window:
    """The part of the document not yet decoded, refilled from the source as it runs out.

    ``text[at:]`` is what is left; what was decoded is let go at each refill, and its lines and
    columns are counted so that an error names its place in the whole document.
    """

    def __init__(self, source: str | TextSource) -> None:
        self.source: TextSource | None = None if isinstance(source, str) else source
        self.text = source if isinstance(source, str) else ""
        self.at = 0
        self.eof = self.source is None
        self.gone = 0  # characters let go before text[0]
        self.lines = 0  # line breaks among them
        self.column = 0  # characters after the last of those line breaks

    def more(self, least: int = 0) -> bool:
        """Append at least ``least`` characters (a window's worth by default, fewer at the end);
        False once there are none."""
        if self.eof:
            return False
        assert self.source is not None  # only a source is ever not at its end
        added = self.source.read(least or _WINDOW)
        if not added:
            self.eof = True
            return False
        text, at = self.text, self.at
        if at:
            breaks = text.count("\n", 0, at)
            self.column = at - text.rfind("\n", 0, at) - 1 if breaks else self.column + at
            self.lines += breaks
            self.gone += at
        self.text, self.at = text[at:] + added, 0
        return True

    def peek(self) -> str:
        """Skip white space; the next character, ``""`` at the end of the document."""
        while True:
            self.at = _SPACE.match(self.text, self.at).end()  # type: ignore[union-attr]  # matches ""
            if self.at < len(self.text) or not self.more():
                return self.text[self.at : self.at + 1]

    def more_after_value(self, close: str) -> bool:
        """Past the separator after a member or item: True at ``,`` (another follows), False at
        ``close`` (the container ends); anything else is the stdlib's delimiter error."""
        after = self.peek()
        if after == ",":
            self.at += 1
            self.peek()
            return True
        if after == close:
            self.at += 1
            return False
        raise self.error("Expecting ',' delimiter")

    def decode(self, scan: Callable[[str, int], tuple[Any, int]]) -> Any:
        """The value ``scan`` reads at ``at``, once enough text has arrived to hold it whole."""
        while True:
            try:
                value, end = scan(self.text, self.at)
            except JSONDecodeError as exc:
                # Cut off by the window's end, or wrong: the whole of it decides.
                if self.more(max(_WINDOW, len(self.text) - self.at)):
                    continue
                raise self.moved(exc) from None
            # A number may go on past the window's end; anything else ends on its own.
            if end < len(self.text) or not self.more():
                self.at = end
                return value

    def rest(self) -> str:
        """The whole document, read to its end; only white space was let go before it, and
        that comes back as blanks and line breaks at the same places."""
        while self.more(max(_WINDOW, len(self.text))):
            pass
        if not self.gone:
            return self.text
        return " " * (self.gone - self.lines - self.column) + "\n" * self.lines + " " * self.column + self.text

    def error(self, message: str) -> JSONDecodeError:
        return self.moved(JSONDecodeError(message, self.text, self.at))

    def moved(self, exc: JSONDecodeError) -> JSONDecodeError:
        """``exc`` with its place counted from the document's start, not the window's."""
        if not self.gone:
            return exc
        lineno = self.lines + exc.lineno
        colno = exc.colno + self.column if exc.lineno == 1 else exc.colno
        pos = self.gone + exc.pos
        moved = JSONDecodeError(exc.msg, "", 0)
        moved.args = (f"{exc.msg}: line {lineno} column {colno} (char {pos})",)
        moved.doc, moved.pos, moved.lineno, moved.colno = exc.doc, pos, lineno, colno
        return moved
