"""Pair every tool_use with its tool_result and decide which calls are pinned (upstream §1.2-1.3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import PairingError
from .messages import SessionMessage, ToolResult


# Slotted: a session of 200k messages has some 100k calls, each alive for the whole compaction.
@dataclass(frozen=True, slots=True)
class ToolCall:
    """A completed call: its tool_use and its tool_result are both in the transcript."""

    id: str  # t1, t2, ... in transcript order, counting completed calls only
    tool_use_id: str
    tool: str
    input: dict[str, Any]
    call_index: int
    result_index: int
    result_chars: int
    is_error: bool
    pinned: bool


@dataclass(frozen=True)
class PendingCall:
    """A tool_use whose result is not in the transcript yet: visible to the judge, never dropped."""

    tool_use_id: str
    tool: str
    input: dict[str, Any]
    call_index: int


@dataclass
class Pairing:
    calls: list[ToolCall] = field(default_factory=list)
    pending: list[PendingCall] = field(default_factory=list)
    # Results whose call is absent; they are left untouched in the output.
    orphan_results: list[str] = field(default_factory=list)
    # Every result by its tool_use_id, orphans included.
    results: dict[str, ToolResult] = field(default_factory=dict)

    @property
    def candidates(self) -> list[ToolCall]:
        return [call for call in self.calls if not call.pinned]


def is_pinned(index: int, total: int, preserve_recent_messages: int) -> bool:
    """The first message and the last ``preserve_recent_messages`` messages are pinned."""
    return index == 0 or index >= total - preserve_recent_messages


def pinned_positions(total: int, preserve_recent_messages: int) -> list[int]:
    """The positions :func:`is_pinned` holds for among ``total`` messages, in order, without
    asking it of every one."""
    return [0, *range(max(1, total - preserve_recent_messages), total)] if total else []


# The messages before the end that count as recent: outputs there are what the next turns most
# often quote, so the budget policy and the edit cap leave more of them whole.
RECENT_MESSAGES = 10


def messages_since(call: ToolCall, messages_total: int) -> int:
    """How many of ``messages_total`` messages came after the one holding ``call``'s output."""
    return messages_total - 1 - call.result_index


def is_recent(call: ToolCall, messages_total: int) -> bool:
    """Whether ``call``'s output arrived in the last ``RECENT_MESSAGES`` of ``messages_total`` messages."""
    return messages_since(call, messages_total) < RECENT_MESSAGES


def pair_tool_calls(messages: Sequence[SessionMessage], preserve_recent_messages: int) -> Pairing:
    """Pair calls with results, rejecting structures that could make a drop unsafe."""
    # Positions only, in the order met: a tuple per call and per result would be 0.2x of a
    # transcript's size of short-lived objects, interleaved with the calls that stay.
    call_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        for use in message.toolUses:
            if use.tool_use_id in call_at:
                raise PairingError(f"Duplicate tool_use_id: {use.tool_use_id}")
            call_at[use.tool_use_id] = index

    results: dict[str, ToolResult] = {}
    result_at: dict[str, int] = {}
    orphans: list[str] = []
    for index, message in enumerate(messages):
        for result in message.toolResults or ():
            if result.tool_use_id in result_at:
                raise PairingError(f"Duplicate tool_result: {result.tool_use_id}")
            results[result.tool_use_id] = result
            result_at[result.tool_use_id] = index
            at = call_at.get(result.tool_use_id)
            if at is None:
                orphans.append(result.tool_use_id)
            elif index < at:
                raise PairingError(f"Tool result precedes its call: {result.tool_use_id}")
    del call_at

    total = len(messages)
    pairing = Pairing(orphan_results=orphans, results=results)
    calls = pairing.calls
    # The calls in transcript order (the order ``call_at`` met them in), each use at hand.
    for call_index, message in enumerate(messages):
        for use in message.toolUses:
            tool_use_id = use.tool_use_id
            result_index = result_at.get(tool_use_id)
            if result_index is None:
                pairing.pending.append(PendingCall(tool_use_id, use.tool, use.input, call_index))
                continue
            result = results[tool_use_id]
            # The fields in order (id, tool_use_id, tool, input, call_index, result_index,
            # result_chars, is_error, pinned): by name, making a call costs twice as much.
            calls.append(
                ToolCall(
                    f"t{len(calls) + 1}",
                    tool_use_id,
                    use.tool,
                    use.input,
                    call_index,
                    result_index,
                    len(result.text),
                    bool(result.isError),
                    # Pinned when its call or its result is.
                    is_pinned(call_index, total, preserve_recent_messages)
                    or is_pinned(result_index, total, preserve_recent_messages),
                )
            )
    return pairing


def collect_tool_calls(messages: Sequence[SessionMessage], preserve_recent_messages: int) -> list[ToolCall]:
    """The completed calls only (upstream's ``collectToolCalls``)."""
    return pair_tool_calls(messages, preserve_recent_messages).calls
