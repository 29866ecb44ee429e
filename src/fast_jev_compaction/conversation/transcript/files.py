"""A conversation file, read line by line when it is a transcript the streamed readers can take."""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import TranscriptError
from ..messages import SessionMessage
from .documents import load_messages
from .records import Lines, live_plan, planned_records, streamed_records
from .stats import KNOWN_RECORD_TYPES


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
            if not isinstance(head, dict) or head.get("type") not in KNOWN_RECORD_TYPES:
                return None
            handle.seek(0)
            source = file.name if name is None else name
            parsed = streamed_records(Lines(handle, source))
            if parsed is None:
                # Boundaries or sidechains: a first pass finds the live part, a second reads it.
                handle.seek(0)
                plan = live_plan(Lines(handle, source))
                if plan is None:
                    return None
                handle.seek(0)
                parsed = planned_records(Lines(handle, source), plan)
    except (OSError, UnicodeDecodeError, TranscriptError):
        return None  # the whole-file reader reports it, in its own words
    if parsed is None or not parsed.stats.recognised:
        return None
    return parsed.messages
