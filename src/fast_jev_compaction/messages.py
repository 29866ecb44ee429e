"""The conversation shapes Claude Code hands a compaction hook (its ``SessionMessage``).

Plain frozen dataclasses with slots: a session of 200,000 messages holds nothing but its own
strings and a few small objects per message, and the hook's start does not pay for a
validation library. ``message_from_wire`` is the one check of the wire shape, used by the hook
event and by the CLI's JSON input alike. Unknown members (``uuid``, ``result``, ``meta``, ...)
are kept in ``extra``, so that an untouched message goes back to the engine exactly as it came
in.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Mapping

Role = Literal["user", "assistant"]
ROLES: tuple[Role, ...] = ("user", "assistant")

# One shared, read-only "no extras" for the many messages and blocks without any.
NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


def _no_extra() -> Mapping[str, Any]:
    return NO_EXTRA


# What a Claude Code transcript says about a call or a result beyond what the model holds, kept in
# ``extra`` under these names so that ``--format transcript`` writes it back as it was:
# BLOCK_FIELDS, a tool_use or tool_result block's own members (a call's ``caller``, a result's
# ``agentId``); RECORD_FIELDS, the fields of the user record holding a result (its
# ``toolUseResult``, the tool's own account of the call), on each result of that record. The
# record repeats the call's input and its output, so whatever cuts either goes without it.
BLOCK_FIELDS = "blockFields"
RECORD_FIELDS = "recordFields"
# A message's blocks in their transcript order, when the writer's own (results or extras, then
# the text, then the calls) would not give it back: per block, the length of a text block (with
# its own members, ``[length, {members}]``), "x" an extra block, "u" a call, "r" a result. The
# text blocks are the message's text, joined by a blank line as the reader joins them.
BLOCK_LAYOUT = "blockLayout"

# Paths, commands and patterns repeat across a session's calls: a value this short is kept as
# one string per document, a file's content or a long command as it came.
SHARED_VALUE_CHARS = 128


def shared_input(fields: Mapping[str, Any], shared: dict[Any, Any]) -> dict[str, Any]:
    """A call's input with its keys interned and its short string values one string each; an
    input made only of such strings and ints is one dict for every call with the same input (a
    re-read, a re-run: the dict costs more than its strings). ``shared`` is the document's
    table of both, dropped once it is read; nothing changes a call's input in place.
    """
    made: dict[str, Any] = {}
    whole = True
    for key, value in fields.items():
        kind = type(value)
        if kind is str and len(value) <= SHARED_VALUE_CHARS:
            value = shared.setdefault(value, value)
        elif kind is not int:  # bool is not int here: True and 1 must not share a dict
            whole = False
        made[sys.intern(key)] = value
    if not whole:
        return made
    # Keys and values in turn: a str value and an int never compare equal, so neither do keys.
    return shared.setdefault(tuple(item for pair in made.items() for item in pair), made)


@dataclass(frozen=True, slots=True)
class ToolUse:
    """A tool_use block of an assistant message; ``text``/``isError`` copy its outcome."""

    tool_use_id: str
    tool: str
    input: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    isError: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=_no_extra)

    def to_wire(self) -> dict[str, Any]:
        return _wire(
            (("tool_use_id", self.tool_use_id), ("tool", self.tool), ("input", self.input),
             ("text", self.text), ("isError", self.isError)),
            self.extra,
        )


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool_result block of a user message."""

    tool_use_id: str
    text: str = ""
    isError: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=_no_extra)

    def to_wire(self) -> dict[str, Any]:
        return _wire((("tool_use_id", self.tool_use_id), ("text", self.text), ("isError", self.isError)), self.extra)


@dataclass(frozen=True, slots=True)
class SessionMessage:
    """One conversation message: text plus its tool blocks.

    The blocks are tuples, from every maker alike, so two messages' blocks compare with ``==``:
    most messages hold one block, a list would cost 32 bytes more, and a message without calls
    shares the one empty tuple.
    """

    role: Role
    text: str = ""
    toolUses: tuple[ToolUse, ...] = ()
    toolResults: tuple[ToolResult, ...] | None = None
    handle: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_no_extra)

    def to_wire(self) -> dict[str, Any]:
        """The JSON shape Claude Code reads back: no ``None`` members, extras kept after the fields."""
        results = None if self.toolResults is None else [r.to_wire() for r in self.toolResults]
        return _wire(
            (("role", self.role), ("text", self.text), ("toolUses", [u.to_wire() for u in self.toolUses]),
             ("toolResults", results), ("handle", self.handle)),
            self.extra,
        )


def _wire(fields: tuple[tuple[str, Any], ...], extra: Mapping[str, Any]) -> dict[str, Any]:
    data = {name: value for name, value in fields if value is not None}
    for name, value in extra.items():
        if value is not None:
            data[name] = value
    return data


# --------------------------------------------------------------------------- the wire check


class MessageError(ValueError):
    """A value that is not SessionMessage-shaped; ``where`` leads from the document to it."""

    # The hook counts it as bad input (hook/category.py).
    fallback_reason = "bad-input"

    def __init__(self, where: tuple[str | int, ...], what: str) -> None:
        self.where = where
        self.what = what
        super().__init__(f"{self.location}: {what}")

    @property
    def location(self) -> str:
        return ".".join(str(part) for part in self.where)

    def under(self, *prefix: str | int) -> MessageError:
        return MessageError((*prefix, *self.where), self.what)


def _dict(value: Any, where: tuple[str | int, ...], name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MessageError(where, f"Input should be a valid dictionary or instance of {name}")
    return value


def _str(data: Mapping[str, Any], key: str, default: Any = ..., *, optional: bool = False) -> Any:
    if key not in data:
        if default is ...:
            raise MessageError((key,), "Field required")
        return default
    value = data[key]
    if isinstance(value, str) or (optional and value is None):
        return value
    raise MessageError((key,), "Input should be a valid string")


def _bool(data: Mapping[str, Any], key: str) -> bool | None:
    value = data.get(key)
    if value is None or isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):  # what a lenient writer sends for a flag
        return bool(value)
    raise MessageError((key,), "Input should be a valid boolean")


def _list(data: Mapping[str, Any], key: str) -> list[Any] | None:
    value = data.get(key)
    if value is None or isinstance(value, list):
        return value
    raise MessageError((key,), "Input should be a valid list")


def _extra(data: Mapping[str, Any], known: frozenset[str]) -> Mapping[str, Any]:
    if len(data) <= len(known) and all(key in known for key in data):
        return NO_EXTRA
    return {key: value for key, value in data.items() if key not in known}


_USE_FIELDS = frozenset({"tool_use_id", "tool", "input", "text", "isError"})
_RESULT_FIELDS = frozenset({"tool_use_id", "text", "isError"})
_MESSAGE_FIELDS = frozenset({"role", "text", "toolUses", "toolResults", "handle"})


class Shared:
    """What the messages of one document share: the calls whose result is still to come (id ->
    the call's id string and the output copied on it) and :func:`shared_input`'s table."""

    __slots__ = ("calls", "inputs")

    def __init__(self) -> None:
        self.calls: dict[str, tuple[str, str | None]] = {}
        self.inputs: dict[Any, Any] = {}


def _tool_use(value: Any, shared: Shared | None) -> ToolUse:
    data = _dict(value, (), "ToolUse")
    tool_input = data.get("input", {})
    if not isinstance(tool_input, dict):
        raise MessageError(("input",), "Input should be a valid dictionary")
    for key in tool_input:
        if not isinstance(key, str):
            raise MessageError(("input", key, "[key]"), "Input should be a valid string")
    use = ToolUse(
        tool_use_id=_str(data, "tool_use_id"),
        # Tool names repeat in every call: one string each.
        tool=sys.intern(_str(data, "tool")),
        input=shared_input(tool_input, shared.inputs if shared is not None else {}),
        text=_str(data, "text", None, optional=True),
        isError=_bool(data, "isError"),
        extra=_extra(data, _USE_FIELDS),
    )
    if shared is not None:
        shared.calls[use.tool_use_id] = (use.tool_use_id, use.text)
    return use


def _tool_result(value: Any, shared: Shared | None) -> ToolResult:
    data = _dict(value, (), "ToolResult")
    tool_use_id, text = _str(data, "tool_use_id"), _str(data, "text", "")
    call = shared.calls.pop(tool_use_id, None) if shared is not None else None
    if call is not None:
        # The output comes twice on the wire, on the call and in its result: one string is kept.
        tool_use_id, text = call[0], call[1] if call[1] == text else text
    return ToolResult(tool_use_id=tool_use_id, text=text, isError=_bool(data, "isError"), extra=_extra(data, _RESULT_FIELDS))


def _blocks(data: Mapping[str, Any], key: str, read: Any, shared: Shared | None) -> tuple[Any, ...] | None:
    items = _list(data, key)
    if items is None:
        return None
    out = []
    for index, item in enumerate(items):
        try:
            out.append(read(item, shared))
        except MessageError as exc:
            raise exc.under(key, index) from None
    return tuple(out)


def message_from_wire(value: Any, shared: Shared | None = None) -> SessionMessage:
    """Check one SessionMessage-shaped JSON value and build it; :class:`MessageError` names the bad field.

    ``shared``, kept across the messages of one document, lets a result share its call's
    strings and calls their inputs.
    """
    data = _dict(value, (), "SessionMessage")
    role = data.get("role")
    if "role" not in data:
        raise MessageError(("role",), "Field required")
    if role not in ROLES:
        raise MessageError(("role",), "Input should be 'user' or 'assistant'")
    if "toolUses" in data and data["toolUses"] is None:  # a list, possibly empty; only toolResults may be null
        raise MessageError(("toolUses",), "Input should be a valid list")
    return SessionMessage(
        role=role,
        text=_str(data, "text", ""),
        toolUses=_blocks(data, "toolUses", _tool_use, shared) or (),
        toolResults=_blocks(data, "toolResults", _tool_result, shared),
        handle=_str(data, "handle", None, optional=True),
        extra=_extra(data, _MESSAGE_FIELDS),
    )


def parse_messages(data: Any) -> list[SessionMessage]:
    """Check a JSON list of SessionMessage-shaped objects; :class:`MessageError` says where it fails."""
    if not isinstance(data, list):
        raise MessageError((), "Input should be a valid list")
    out = []
    shared = Shared()
    for index, item in enumerate(data):
        try:
            out.append(message_from_wire(item, shared))
        except MessageError as exc:
            raise exc.under(index) from None
    return out
