"""Compact boundaries: where the live part of a transcript starts, and the records a boundary
keeps from before it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .stats import TranscriptStats


def is_boundary(record: Mapping[str, Any]) -> bool:
    return record.get("type") == "system" and record.get("subtype") == "compact_boundary"


def _preserved_uuids(boundary: Mapping[str, Any], before: list[dict[str, Any]]) -> list[str]:
    """Uuids of pre-boundary records that newer builds keep verbatim after the summary."""
    meta = boundary.get("compactMetadata")
    if not isinstance(meta, Mapping):
        return []
    listed = meta.get("preservedMessages")
    if isinstance(listed, Mapping) and isinstance(listed.get("uuids"), list):
        return [u for u in listed["uuids"] if isinstance(u, str)]
    segment = meta.get("preservedSegment")
    if not isinstance(segment, Mapping):
        return []
    head, tail = segment.get("headUuid"), segment.get("tailUuid")
    if not isinstance(head, str) or not isinstance(tail, str):
        return []
    by_uuid = {r["uuid"]: r for r in before if isinstance(r.get("uuid"), str)}
    chain: list[str] = []
    current: Any = tail
    # Walk tail -> head through parentUuid; a broken chain means we cannot trust it.
    while isinstance(current, str) and current in by_uuid and len(chain) <= len(by_uuid):
        chain.append(current)
        if current == head:
            return chain[::-1]
        current = by_uuid[current].get("parentUuid")
    return []


def live_records(records: list[dict[str, Any]], subagent: bool, stats: TranscriptStats) -> list[dict[str, Any]]:
    """The records after the last compact boundary, plus any preserved segment it names."""
    last = -1
    for index, record in enumerate(records):
        # A main file ignores boundaries of inline sidechains: they compact another context.
        if is_boundary(record) and (subagent or record.get("isSidechain") is not True):
            stats.compact_boundaries += 1
            last = index
    if last < 0:
        return records
    before, boundary, live = records[:last], records[last], records[last + 1 :]
    stats.records_before_boundary = len(before)
    wanted = _preserved_uuids(boundary, before)
    if not wanted:
        return live
    live_uuids = {r.get("uuid") for r in live}
    wanted_set = {u for u in wanted if u not in live_uuids}
    preserved = [r for r in before if r.get("uuid") in wanted_set]
    if not preserved:
        return live
    stats.preserved_records = len(preserved)
    meta = boundary.get("compactMetadata")
    anchor = None
    if isinstance(meta, Mapping):
        segment = meta.get("preservedSegment") or meta.get("preservedMessages")
        if isinstance(segment, Mapping):
            anchor = segment.get("anchorUuid")
    at = 0
    for index, record in enumerate(live):
        if (anchor is not None and record.get("uuid") == anchor) or (
            anchor is None and record.get("isCompactSummary") is True
        ):
            at = index + 1
            break
    return live[:at] + preserved + live[at:]


def keeps_preserved(boundary: Mapping[str, Any]) -> bool:
    meta = boundary.get("compactMetadata")
    return isinstance(meta, Mapping) and any(isinstance(meta.get(key), Mapping) for key in ("preservedMessages", "preservedSegment"))
