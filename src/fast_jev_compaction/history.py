"""Render messages as Jev history entries (upstream §3.3), structured or as one-liners (§4.3)."""

from __future__ import annotations

import re
from typing import Any, Sequence

from .messages import SessionMessage
from .pairing import Pairing, PendingCall, ToolCall
from .textutil import js_json, truncate

UNSERIALIZABLE = "[unserializable input]"
_SPACES = re.compile(r"\s+")


def input_json(value: dict[str, Any], limit: int) -> str:
    try:
        return truncate(js_json(value), limit)
    except (TypeError, ValueError):
        return UNSERIALIZABLE


def result_note(call: ToolCall) -> str:
    return f"{'error' if call.is_error else 'ok'}, {call.result_chars} chars (omitted)"


# How much of each output the state shows, per input stage: the judge reads content too, and a
# digest shrinks with the inputs when the state has to.
DIGEST_CHARS = {1000: 300, 200: 100}
_TERM = re.compile(r"[A-Za-z_][\w.\-/]{5,}[\w]")
_TERMS = 8


def output_digest(text: str, budget: int) -> str:
    """A one-line glimpse of an output: its opening and closing, and its most repeated terms."""
    flat = " ⏎ ".join(line.strip() for line in text.splitlines() if line.strip())
    if len(flat) > budget:
        head = max(0, budget * 3 // 5)
        flat = f"{flat[:head]} … {flat[len(flat) - (budget - head):]}"
    counts: dict[str, int] = {}
    for term in _TERM.findall(text[:50_000]):
        if any(c.isdigit() or c in "_./-" for c in term) or any(c.isupper() for c in term[1:]):
            counts[term] = counts.get(term, 0) + 1
    terms = sorted(counts, key=lambda t: (-counts[t], t))[:_TERMS]
    return f"{flat} [terms: {' '.join(terms)}]" if terms else flat


def structured_call(call: ToolCall, input_chars: int, output: str | None = None) -> dict[str, Any]:
    entry = {"id": call.id, "tool": call.tool, "input": input_json(call.input, input_chars), "result": result_note(call)}
    budget = DIGEST_CHARS.get(input_chars, 0)
    if output and budget:
        entry["digest"] = output_digest(output, budget)
    return entry


def pending_call(call: PendingCall, input_chars: int) -> dict[str, Any]:
    return {"tool_use_id": call.tool_use_id, "tool": call.tool, "input": input_json(call.input, input_chars)}


def one_line_input(value: dict[str, Any]) -> str:
    """``key=value`` pairs, at most 60 characters.

    Upstream rendered a non-string value as the JSON of ``{key: value}``, which printed the key
    twice (``limit={"limit":100}``, §9.5); we print ``limit=100``.
    """
    parts = []
    for key, item in value.items():
        if isinstance(item, str):
            parts.append(f"{key}={item}")
        else:
            try:
                parts.append(f"{key}={truncate(js_json(item), 200)}")
            except (TypeError, ValueError):
                parts.append(f"{key}={UNSERIALIZABLE}")
    return truncate(_SPACES.sub(" ", " ".join(parts)), 60)


def one_line_call(call: ToolCall) -> str:
    status = "error" if call.is_error else "ok"
    return f"{call.id} {call.tool} {one_line_input(call.input)} → {status} {call.result_chars}ch"


def calls_by_message(pairing: Pairing) -> tuple[dict[int, list[ToolCall]], dict[int, list[PendingCall]]]:
    completed: dict[int, list[ToolCall]] = {}
    for call in pairing.calls:
        completed.setdefault(call.call_index, []).append(call)
    pending: dict[int, list[PendingCall]] = {}
    for call in pairing.pending:
        pending.setdefault(call.call_index, []).append(call)
    return completed, pending


def history_entries(
    messages: Sequence[SessionMessage], pairing: Pairing, input_chars: int
) -> list[dict[str, Any]]:
    """One entry per message that has text, completed calls or pending calls.

    Results are represented by the note (and digest) on their call, so result-only messages do
    not appear.
    """
    completed, pending = calls_by_message(pairing)
    outputs = {r.tool_use_id: r.text for m in messages for r in m.toolResults or ()}
    entries: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        calls = completed.get(index, [])
        waiting = pending.get(index, [])
        if not message.text.strip() and not calls and not waiting:
            continue
        entry: dict[str, Any] = {"i": index, "role": message.role, "text": message.text}
        if calls:
            entry["tool_calls"] = [structured_call(call, input_chars, outputs.get(call.tool_use_id)) for call in calls]
        if waiting:
            entry["pending_calls"] = [pending_call(call, input_chars) for call in waiting]
        entries.append(entry)
    return entries
