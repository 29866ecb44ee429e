"""The one JSON document the mod writes to the entry's stdin (docs/ARCHITECTURE.md, hook protocol).

Read as it is decoded: the top-level object member by member and the ``messages`` array one
message at a time, each checked and built before the next is decoded, so a large event is
never alive as text, as JSON objects and as messages all at once. The checks are the messages'
own (``messages.message_from_wire``); a bad event is a :class:`MessageError` naming the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import JSONDecodeError
from typing import Any, Callable, Mapping

from ..messages import Calls, MessageError, SessionMessage, message_from_wire

_FIELDS = ("event", "trigger", "instructions", "agentId", "sessionId", "pluginRoot", "pluginData", "cwd", "options", "context")
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# The stdlib's own string scanner (C), the one json.loads uses; not in the typeshed stubs.
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


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


def _event(fields: Mapping[str, Any], messages: list[SessionMessage]) -> HookEvent:
    """The event from its checked messages and its other members, checked here."""
    values: dict[str, Any] = {}
    for name in _FIELDS:
        if name not in fields or fields[name] is None and name not in ("event", "trigger", "options"):
            continue
        value = fields[name]
        if name in ("options", "context"):
            if not isinstance(value, dict):
                raise MessageError((name,), "Input should be a valid dictionary")
        elif not isinstance(value, str):
            raise MessageError((name,), "Input should be a valid string")
        values[name] = value
    extra = {key: value for key, value in fields.items() if key not in _FIELDS and key != "messages"}
    return HookEvent(messages=messages, extra=extra, **values)


def read_event(document: Any) -> HookEvent:
    """Check a decoded event (a dict) and build it."""
    if not isinstance(document, dict):
        raise MessageError((), "Input should be a valid dictionary or instance of HookEvent")
    if "messages" not in document:
        raise MessageError(("messages",), "Field required")
    items = document["messages"]
    if not isinstance(items, list):
        raise MessageError(("messages",), "Input should be a valid list")
    messages = []
    calls: Calls = {}
    for index, item in enumerate(items):
        try:
            messages.append(message_from_wire(item, calls))
        except MessageError as exc:
            raise exc.under("messages", index) from None
    return _event(document, messages)


def parse_event(text: str, on_header: Callable[[dict[str, Any]], None] | None = None) -> HookEvent:
    """Decode and check the event's text as one pass; ``on_header`` gets the members before ``messages``.

    ``on_header`` lets the caller learn the data folder and the options (the mod sends them
    first) before the messages, the long part, are read. Errors come as ``json.loads`` gives
    them (:class:`json.JSONDecodeError`, the syntax first) or as a :class:`MessageError`.
    """
    at = _SPACE.match(text).end()  # type: ignore[union-attr]  # matches the empty string
    if not text.startswith("{", at):
        return read_event(json.loads(text))  # not an object: the stdlib's error, or the check's
    fields: dict[str, Any] = {}
    messages: list[SessionMessage] | None = None
    problem: MessageError | None = None
    at = _skip(text, at + 1)
    if text.startswith("}", at):
        at += 1
    else:
        while True:
            if not text.startswith('"', at):
                raise JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
            key, at = _scanstring(text, at + 1)
            at = _skip(text, at)
            if not text.startswith(":", at):
                raise JSONDecodeError("Expecting ':' delimiter", text, at)
            at = _skip(text, at + 1)
            if key == "messages" and text.startswith("[", at):
                if on_header is not None:
                    on_header(fields)
                    on_header = None
                messages, problem, at = _messages(text, at)
                fields.pop("messages", None)  # a repeated member: the last one counts, as in json.loads
            else:
                fields[key], at = _DECODER.raw_decode(text, at)
                if key == "messages":
                    messages, problem = None, None
            at = _skip(text, at)
            if text.startswith(",", at):
                at = _skip(text, at + 1)
                continue
            if text.startswith("}", at):
                at += 1
                break
            raise JSONDecodeError("Expecting ',' delimiter", text, at)
    at = _skip(text, at)
    if at != len(text):
        raise JSONDecodeError("Extra data", text, at)
    if on_header is not None:
        on_header(fields)
    if problem is not None:
        raise problem
    if messages is None:
        return read_event(fields)  # no messages array: the check says what is wrong
    return _event(fields, messages)


def _skip(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]  # matches the empty string


def _messages(text: str, at: int) -> tuple[list[SessionMessage], MessageError | None, int]:
    """The array at ``text[at] == "["``, message by message; after a bad one the rest is only decoded."""
    out: list[SessionMessage] = []
    problem: MessageError | None = None
    at = _skip(text, at + 1)
    if text.startswith("]", at):
        return out, None, at + 1
    index = 0
    calls: Calls = {}
    while True:
        item, at = _DECODER.raw_decode(text, at)
        if problem is None:
            try:
                out.append(message_from_wire(item, calls))
            except MessageError as exc:
                problem = exc.under("messages", index)
        del item
        index += 1
        at = _skip(text, at)
        if text.startswith(",", at):
            at = _skip(text, at + 1)
            continue
        if text.startswith("]", at):
            return out, problem, at + 1
        raise JSONDecodeError("Expecting ',' delimiter", text, at)
