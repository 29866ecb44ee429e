"""Claude Code records (JSONL lines or decoded objects) read into the live conversation: whole,
or one record at a time when nothing needs the whole list."""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...errors import TranscriptError
from ..messages import SessionMessage
from ..stored import StoredJSON
from .assembler import Assembler
from .blocks import record_fields
from .boundaries import is_boundary, keeps_preserved, live_records
from .stats import CONVERSATION_TYPES, TranscriptParse, TranscriptStats


def typed_records(records: Iterable[Any], stats: TranscriptStats) -> Iterator[dict[str, Any]]:
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
    lines = isinstance(records, Lines)
    numbers = array("q")
    typed = []
    for record in typed_records(records, stats):
        numbers.append(records.number if lines else stats.lines)  # type: ignore[attr-defined]
        typed.append(record)
    conversation = [r for r in typed if r["type"] in CONVERSATION_TYPES]
    stats.subagent = bool(conversation) and all(r.get("isSidechain") is True for r in conversation)

    def where(record: Any) -> str:  # asked only for an error or a held result: a walk will do
        number = next(n for r, n in zip(typed, numbers) if r is record)
        return f"{source}:{number}" if lines else f"{source}: item {number}"

    return _assemble(live_records(typed, stats.subagent, stats), stats, where)


class _NotStreamable(Exception):
    """A record that needs the whole transcript at once (a compact boundary, a sidechain)."""


def streamed_records(records: Lines) -> TranscriptParse | None:
    """:func:`parse_records` one record at a time, none kept; ``None`` when a compact boundary
    or a sidechain record needs the whole list (the caller then reads it that way)."""
    stats = TranscriptStats()

    def live() -> Iterator[dict[str, Any]]:
        for record in typed_records(records, stats):
            if is_boundary(record) or record.get("isSidechain") is True:
                raise _NotStreamable
            yield record

    try:
        return _assemble(live(), stats, records.where)
    except _NotStreamable:
        return None


@dataclass
class Plan:
    """What a first reading of a transcript says about its live part."""

    subagent: bool
    boundaries: int
    last_boundary: int  # the index (among typed records) of the last boundary that counts; -1 for none


def live_plan(records: Iterable[Any]) -> Plan | None:
    """Find the live part in one pass keeping only the boundaries; ``None`` when the last one
    keeps a preserved segment (the records before it are then needed: read whole)."""
    probe = TranscriptStats()
    conversation = sidechain_only = 0
    candidates: list[tuple[int, dict[str, Any]]] = []
    for index, record in enumerate(typed_records(records, probe)):
        if record["type"] in CONVERSATION_TYPES:
            conversation += 1
            sidechain_only += record.get("isSidechain") is True
        if is_boundary(record):
            candidates.append((index, record))
    subagent = conversation > 0 and sidechain_only == conversation
    # A main file ignores boundaries of inline sidechains: they compact another context.
    counted = [(i, r) for i, r in candidates if subagent or r.get("isSidechain") is not True]
    if counted and keeps_preserved(counted[-1][1]):
        return None
    return Plan(subagent, len(counted), counted[-1][0] if counted else -1)


def planned_records(records: Lines, plan: Plan) -> TranscriptParse:
    """:func:`parse_records` one record at a time, the live part found by :func:`live_plan`."""
    stats = TranscriptStats(subagent=plan.subagent, compact_boundaries=plan.boundaries)
    if plan.last_boundary >= 0:
        stats.records_before_boundary = plan.last_boundary
    live = (record for index, record in enumerate(typed_records(records, stats)) if index > plan.last_boundary)
    return _assemble(live, stats, records.where)


def _assemble(live: Iterable[dict[str, Any]], stats: TranscriptStats, where: Callable[[Any], str]) -> TranscriptParse:
    """The messages of the live records; ``where`` names a record's place in errors."""
    assembler = Assembler(stats, where)
    for record in live:
        kind = record["type"]
        if kind not in CONVERSATION_TYPES:
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
                own = record_fields(record) if kind == "user" else None
                # Passed through whole, read back only to be written: kept as its JSON text (stored.py).
                fields = None if own is None else StoredJSON.of(own)
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


class Lines:
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
    return parse_records(Lines(lines, source), source)


def parse_transcript(lines: Iterable[str], source: str = "<stdin>") -> list[SessionMessage]:
    """Parse Claude Code transcript JSONL lines into the live conversation."""
    return parse_transcript_with_stats(lines, source).messages
