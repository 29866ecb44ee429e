"""Aligned text tables for the terminal, and the per-call decision table shown by the CLI."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..decide.decisions import BUDGET, THRESHOLD, action_name

TARGET_CHARS = 48
# Input fields that name what a call worked on, most telling first.
_TARGET_KEYS = ("file_path", "notebook_path", "command", "pattern", "path", "url", "query", "description", "prompt")
# Reasons that only restate the outcome; anything else (pinned, a rule's name) is worth showing.
# Reasons that mean "the judge's probabilities decided" (old logs' spellings included): the table
# shows the probabilities; any other reason is a rule's name and is shown as it is.
PLAIN_REASONS = frozenset(
    {"", "kept", "result_dropped", "call_dropped", "judge", THRESHOLD, BUDGET, "keep", "truncate", "drop"}
)
DECISION_HEADERS = ("call", "tool", "target", "size", "decision", "rule / probabilities", "freed")
_RIGHT = {"size", "freed"}


def render(headers: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[str] | set[str] = frozenset()) -> str:
    """Columns padded to their widest cell; ``right`` names the columns aligned right (numbers)."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [
            cell.rjust(width) if header in right else cell.ljust(width)
            for header, cell, width in zip(headers, cells, widths)
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)]) + "\n"


def _short(text: str, limit: int = TARGET_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def target(tool_input: Mapping[str, Any] | str | None) -> str:
    """What a call worked on: its path, command, pattern or URL, else a redacted preview of its input."""
    if isinstance(tool_input, str):  # a stored preview: redacted, maybe clipped JSON
        for key in _TARGET_KEYS:
            found = re.search(rf'"{key}":"((?:[^"\\]|\\.)*)', tool_input)
            if found:
                return _short(found.group(1).replace('\\"', '"'))
        return _short(tool_input)
    if not tool_input:
        return "-"
    from ..redaction import redact_text
    from .redact import preview

    for key in _TARGET_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return _short(redact_text(value))
    return _short(preview(dict(tool_input)))


def why(reason: str, keep_call: float | None, keep_result: float | None) -> str:
    if reason not in PLAIN_REASONS:
        return reason
    if keep_call is None or keep_result is None:
        return "-"
    return f"call {keep_call:.2f}  result {keep_result:.2f}"


def decision_row(
    call_id: str, tool: str, tool_input: Mapping[str, Any] | str | None, size: int | None,
    action: str, reason: str, keep_call: float | None, keep_result: float | None, freed: int,
) -> list[str]:
    return [
        call_id, tool, target(tool_input), "-" if size is None else f"{size:,}",
        action_name(action), why(reason, keep_call, keep_result), f"{freed:,}",
    ]


def decision_table(rows: Sequence[Sequence[str]]) -> str:
    return render(DECISION_HEADERS, rows, _RIGHT) if rows else "(no tool calls)\n"
