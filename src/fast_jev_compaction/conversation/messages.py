"""The conversation shapes Claude Code hands a compaction hook (its ``SessionMessage``).

Plain frozen dataclasses with slots: a session of 200,000 messages holds nothing but its own
strings and a few small objects per message. Their wire shape is declared once, as pydantic
TypedDicts (``SessionMessageWire`` and its blocks); ``message_from_wire`` validates one message
with them and builds the dataclasses, for the hook event and the CLI's JSON input alike.
Unknown members (``uuid``, ``result``, ``meta``, ...) are kept in ``extra``, so that an
untouched message goes back to the engine exactly as it came in.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, Literal, Mapping

from pydantic import BeforeValidator, ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, TypedDict

from .stored import as_stored, unstored

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
# The extra members holding a tool's stored record (the transcript's, and the hook message's
# ``result``): kept as JSON text (``stored.StoredJSON``), its value again in ``to_wire``.
STORED_MEMBERS = frozenset({RECORD_FIELDS, "result"})
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

    def to_wire(self, *, stored: bool = False) -> dict[str, Any]:
        return _wire(
            (("tool_use_id", self.tool_use_id), ("tool", self.tool), ("input", self.input),
             ("text", self.text), ("isError", self.isError)),
            self.extra, stored,
        )


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool_result block of a user message."""

    tool_use_id: str
    text: str = ""
    isError: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=_no_extra)

    def to_wire(self, *, stored: bool = False) -> dict[str, Any]:
        return _wire((("tool_use_id", self.tool_use_id), ("text", self.text), ("isError", self.isError)), self.extra, stored)


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

    def to_wire(self, *, stored: bool = False) -> dict[str, Any]:
        """The JSON shape Claude Code reads back: no ``None`` members, extras kept after the
        fields. With ``stored``, a tool's stored record stays :class:`~.stored.StoredJSON`, for a
        writer that puts its text in place (``stored.json_pieces``)."""
        results = None if self.toolResults is None else [r.to_wire(stored=stored) for r in self.toolResults]
        return _wire(
            (("role", self.role), ("text", self.text), ("toolUses", [u.to_wire(stored=stored) for u in self.toolUses]),
             ("toolResults", results), ("handle", self.handle)),
            self.extra, stored,
        )


def _wire(fields: tuple[tuple[str, Any], ...], extra: Mapping[str, Any], stored: bool) -> dict[str, Any]:
    data = {name: value for name, value in fields if value is not None}
    for name, value in extra.items():
        if value is not None:
            data[name] = value if stored else unstored(value)
    return data


# The wire shape is declared once, as pydantic TypedDicts (strict: a number is not a string, a
# string not a flag; unknown members allowed and kept). A message is validated into a plain dict
# of the same strings (pydantic hands the very objects back, it does not copy text), then built
# once into the dataclasses above, which is where sharing and interning happen. The event is
# read one message at a time, so the validated dict of one message is all that is ever alive
# beside the built messages.


def _flag(value: Any) -> Any:
    """A lenient writer's ``1``/``0`` for a flag counts as true/false; nothing else does."""
    return bool(value) if type(value) is int and value in (0, 1) else value


Flag = Annotated[bool, BeforeValidator(_flag)]
WIRE_CONFIG = ConfigDict(extra="allow", strict=True)


@with_config(WIRE_CONFIG)
class ToolUseWire(TypedDict):
    """A ``tool_use`` block as Claude Code hands it."""

    tool_use_id: str
    tool: str
    input: NotRequired[dict[str, Any]]
    text: NotRequired[str | None]
    isError: NotRequired[Flag | None]


@with_config(WIRE_CONFIG)
class ToolResultWire(TypedDict):
    """A ``tool_result`` block as Claude Code hands it."""

    tool_use_id: str
    text: NotRequired[str]
    isError: NotRequired[Flag | None]


@with_config(WIRE_CONFIG)
class SessionMessageWire(TypedDict):
    """A ``SessionMessage`` as Claude Code hands it: ``toolUses`` a list (possibly empty), only
    ``toolResults`` may be null."""

    role: Role
    text: NotRequired[str]
    toolUses: NotRequired[list[ToolUseWire]]
    toolResults: NotRequired[list[ToolResultWire] | None]
    handle: NotRequired[str | None]


MESSAGE_ADAPTER: TypeAdapter[SessionMessageWire] = TypeAdapter(SessionMessageWire)


class MessageError(ValueError):
    """A value that is not SessionMessage-shaped; ``where`` leads from the document to it."""

    # The hook counts it as bad input (hook/category.py).
    fallback_reason = "bad-input"

    def __init__(self, where: tuple[str | int, ...], what: str) -> None:
        self.where = where
        self.what = what
        super().__init__(f"{self.location}: {what}" if where else what)

    @classmethod
    def first_of(cls, error: ValidationError) -> MessageError:
        """The first problem pydantic found, as one line: its field path and its message."""
        first = error.errors(include_url=False, include_context=False, include_input=False)[0]
        return cls(tuple(first["loc"]), first["msg"])

    @property
    def location(self) -> str:
        return ".".join(str(part) for part in self.where)

    def under(self, *prefix: str | int) -> MessageError:
        return MessageError((*prefix, *self.where), self.what)


def _extra(data: Mapping[str, Any], known: frozenset[str]) -> Mapping[str, Any]:
    if len(data) <= len(known) and all(key in known for key in data):
        return NO_EXTRA
    return {key: as_stored(value) if key in STORED_MEMBERS else value for key, value in data.items() if key not in known}


_USE_FIELDS = frozenset(ToolUseWire.__annotations__)
_RESULT_FIELDS = frozenset(ToolResultWire.__annotations__)
_MESSAGE_FIELDS = frozenset(SessionMessageWire.__annotations__)


class Shared:
    """What the messages of one document share: the calls whose result is still to come (id ->
    the call's id string, the output copied on it and its stored record) and
    :func:`shared_input`'s table."""

    __slots__ = ("calls", "inputs")

    def __init__(self) -> None:
        self.calls: dict[str, tuple[str, str | None, Any]] = {}
        self.inputs: dict[Any, Any] = {}


def _tool_use(data: ToolUseWire, shared: Shared) -> ToolUse:
    use = ToolUse(
        tool_use_id=data["tool_use_id"],
        # Tool names repeat in every call: one string each.
        tool=sys.intern(data["tool"]),
        input=shared_input(data.get("input", {}), shared.inputs),
        text=data.get("text"),
        isError=data.get("isError"),
        extra=_extra(data, _USE_FIELDS),
    )
    shared.calls[use.tool_use_id] = (use.tool_use_id, use.text, use.extra.get("result"))
    return use


def _tool_result(data: ToolResultWire, shared: Shared) -> ToolResult:
    tool_use_id, text = data["tool_use_id"], data.get("text", "")
    extra = _extra(data, _RESULT_FIELDS)
    call = shared.calls.pop(tool_use_id, None)
    if call is not None:
        # The output and the tool's record come twice on the wire, on the call and in its
        # result: one of each is kept.
        tool_use_id, text = call[0], call[1] if call[1] == text else text
        if call[2] is not None and extra.get("result") == call[2]:
            extra = {**extra, "result": call[2]}
    return ToolResult(tool_use_id=tool_use_id, text=text, isError=data.get("isError"), extra=extra)


def message_from_wire(value: Any, shared: Shared | None = None) -> SessionMessage:
    """Validate one SessionMessage-shaped JSON value (:data:`MESSAGE_ADAPTER`) and build it;
    :class:`MessageError` names the first bad field.

    ``shared``, kept across the messages of one document, lets a result share its call's
    strings and calls their inputs.
    """
    try:
        data = MESSAGE_ADAPTER.validate_python(value)
    except ValidationError as exc:
        raise MessageError.first_of(exc) from None
    shared = shared if shared is not None else Shared()
    results = data.get("toolResults")
    return SessionMessage(
        role=data["role"],
        text=data.get("text", ""),
        toolUses=tuple(_tool_use(use, shared) for use in data.get("toolUses", ())),
        toolResults=None if results is None else tuple(_tool_result(result, shared) for result in results),
        handle=data.get("handle"),
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
