"""The images, documents and loaded tools of a tool result, which a rebuilt message cannot carry.

Claude Code rebuilds a message answered without its handle from ``role``, ``text`` and the tool
blocks, and every tool_result message goes back without one (:func:`.turns.keeps_handle`). A
result's non-text content is not in its ``text``: an image a Read or a browser tool returned
arrives as ``text: ""`` (Claude Code 2.1.332), and a ToolSearch result's ``tool_reference``
blocks as nothing. Without a note the model would find an empty result where it saw a picture.

Where the content is still there this module saves it to the archive, content-addressed and
written once like the cut outputs, as a file the Read tool can show (``<hash>.png``), and the
result says where it went; where only a description is left, the result says what was there.
The notes go in before the compaction, so they are part of the result's text whatever it
decides: a kept result shows them, a cut one's saved file holds them, and a dropped call's
marker names that file. The content comes from the tool's stored record the engine hands over as ``result``
(Read: ``{"type": "image", "file": {"base64", "type"}}``; ToolSearch: ``{"matches": [...]}``;
an MCP tool: its content blocks, the very list the model read), and where that leaves it in doubt from the session
transcript (the ``tool_result`` blocks the model read, base64 ``source.data`` included).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from itertools import chain
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ..conversation.messages import SessionMessage, ToolResult, ToolUse
from ..conversation.stored import StoredJSON, unstored
from ..decide.archive import EXTENSIONS, archive_path, base64_bytes, write_archive
from ..decide.markers import media_note, tools_note
from .archive import MAX_ARCHIVE_AGE_DAYS, MAX_ARCHIVE_BYTES
from .event import HookEvent
from .meta import MAX_TRANSCRIPT_BYTES, transcript_file
from .turns import keeps_handle

# Bytes that mark a transcript line worth decoding: a tool result with a non-text block.
_HINTS = (b'"image"', b'"document"', b'"tool_reference"')
# ... and those that mark a tool's stored record worth decoding (from_record's own kinds besides).
_RECORD_HINTS = (*_HINTS, b'"pdf"', b'"matches"')


@dataclass(frozen=True, slots=True)
class Media:
    """One non-text item of a tool result: an image or document, or the tools a search loaded."""

    kind: str  # "image", "document" or "tools"
    media_type: str = ""
    data: bytes | None = None
    size: int | None = None
    tools: tuple[str, ...] = ()

    @property
    def what(self) -> str:
        name = self.media_type or self.kind
        return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _sourced(kind: str, source: Any, fallback_type: str = "") -> Media:
    source = source if isinstance(source, Mapping) else {}
    media_type = source.get("media_type")
    data = base64_bytes(source.get("data")) if source.get("type", "base64") == "base64" else None
    return Media(kind, media_type if isinstance(media_type, str) else fallback_type, data, len(data) if data is not None else None)


def from_content(content: Any) -> list[Media]:
    """The non-text items of a tool_result ``content`` list, in order; loaded tools as one item."""
    if not isinstance(content, list):
        return []
    found: list[Media] = []
    tools: list[str] = []
    for item in content:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "image":
            found.append(_sourced("image", item.get("source")))
        elif kind == "document":
            found.append(_sourced("document", item.get("source"), "application/pdf"))
        elif kind == "tool_reference":
            name = item.get("tool_name") or item.get("name")
            if isinstance(name, str) and name:
                tools.append(name)
    if tools:
        found.append(Media("tools", tools=tuple(tools)))
    return found


def from_record(record: Any) -> list[Media]:
    """The non-text items of a tool's stored record (the event's ``result``)."""
    if isinstance(record, list):
        return from_content(record)
    if not isinstance(record, Mapping):
        return []
    kind = record.get("type")
    file = record.get("file")
    if kind in ("image", "pdf") and isinstance(file, Mapping):
        data = base64_bytes(file.get("base64"))
        media_type = file.get("type") if kind == "image" else "application/pdf"
        original = file.get("originalSize")
        size = len(data) if data is not None else original if isinstance(original, int) else None
        return [Media("image" if kind == "image" else "document", media_type if isinstance(media_type, str) else "", data, size)]
    matches = record.get("matches")
    if isinstance(matches, list) and matches and all(isinstance(m, str) for m in matches):
        return [Media("tools", tools=tuple(matches))]
    return from_content(record.get("content"))


def _record_media(record: Any) -> list[Media]:
    """:func:`from_record` of a record as a block holds it: one kept as its JSON text
    (``stored.StoredJSON``) is decoded only when it names a non-text kind, not twice (on the call
    and on its result) for every command output and file text."""
    if isinstance(record, StoredJSON) and not any(hint in record.utf8 for hint in _RECORD_HINTS):
        return []
    return from_record(unstored(record))


def transcript_media(lines: Iterable[bytes], wanted: set[str]) -> dict[str, list[Media]]:
    """The non-text items of the ``wanted`` tool results, by tool_use_id, from transcript lines.

    Only lines holding a non-text block are decoded; the last record of an id wins (the live one).
    """
    found: dict[str, list[Media]] = {}
    for line in lines:
        if b'"tool_result"' not in line or not any(hint in line for hint in _HINTS):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        message = record.get("message") if isinstance(record, dict) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "tool_result" and block.get("tool_use_id") in wanted:
                items = from_content(block.get("content"))
                if items:
                    found[str(block["tool_use_id"])] = items
    return found


def saved_path(directory: str, item: Media) -> str | None:
    """Where an item's bytes go: ``<hash><extension>``; None when it has none or Read cannot show it."""
    extension = EXTENSIONS.get(item.media_type)
    if item.data is None or extension is None:
        return None
    return archive_path(directory, item.data, extension)


def notes_for(items: Sequence[Media], directory: str | None) -> tuple[list[str], dict[str, bytes]]:
    """The notes that stand for ``items``, and the files they name (path -> bytes)."""
    notes: list[str] = []
    files: dict[str, bytes] = {}
    for item in items:
        if item.kind == "tools":
            notes.append(tools_note(list(item.tools)))
            continue
        path = saved_path(directory, item) if directory else None
        if path is not None and item.data is not None:
            files[path] = item.data
        notes.append(media_note(item.what, item.size, path))
    return notes, files


def with_notes(
    messages: Sequence[SessionMessage], found: Mapping[str, list[Media]], directory: str | None
) -> tuple[list[SessionMessage], dict[str, bytes]]:
    """Each result with non-text items (every result goes back rebuilt) gets their notes after
    its text, once: a note already there from an earlier pass is not repeated; the other
    messages come back as they are."""
    out: list[SessionMessage] = []
    files: dict[str, bytes] = {}
    for message in messages:
        if keeps_handle(message) or not message.toolResults or not any(r.tool_use_id in found for r in message.toolResults):
            out.append(message)
            continue
        results: list[ToolResult] = []
        for result in message.toolResults:
            notes, named = notes_for(found.get(result.tool_use_id, []), directory)
            fresh = [note for note in notes if note not in result.text]
            files.update(named)
            results.append(replace(result, text="\n".join([result.text, *fresh] if result.text else fresh)) if fresh else result)
        out.append(replace(message, toolResults=tuple(results)))
    return out, files


def found_media(original: Sequence[SessionMessage], transcript: Path | None) -> dict[str, list[Media]]:
    """Non-text items of the input's tool results: from the stored records, and from the
    transcript for the results a record leaves in doubt.

    A record with the bytes settles its result (Read's holds the very image the model got); an
    image whose record lacks them, or an empty result without a telling record, is looked up in
    the transcript. Most compactions have neither and never open it.
    """
    found: dict[str, list[Media]] = {}
    # The same record rides on the call and on its result; the result's is read first. Walked,
    # not listed: a pair per block of a long session is the hook's peak of memory.
    blocks: Iterator[ToolResult | ToolUse] = chain(
        (r for m in original for r in m.toolResults or ()), (u for m in original for u in m.toolUses)
    )
    for block in blocks:
        if block.tool_use_id not in found and "result" in block.extra:
            items = _record_media(block.extra["result"])
            if items:
                found[block.tool_use_id] = items
    wanted = {
        r.tool_use_id
        for m in original
        for r in m.toolResults or []
        if any(item.kind != "tools" and item.data is None for item in found.get(r.tool_use_id, ()))
        or (r.tool_use_id not in found and not r.text)
    }
    if wanted and transcript is not None and transcript.stat().st_size <= MAX_TRANSCRIPT_BYTES:
        with transcript.open("rb") as fh:
            found.update(transcript_media(fh, wanted))
    return found


def with_media(
    event: HookEvent,
    archive_dir: str | None,
    report_error: Callable[[str], None],
) -> list[SessionMessage]:
    """The event's messages with a note in each result for what its text cannot carry, the
    items it names saved; a transcript or archive that cannot be used costs the paths only (the
    notes then say what was there)."""
    original = messages = event.messages
    try:
        # A subagent's results are in its own transcript, not the session's: records only.
        transcript = None if event.agentId else transcript_file(event.pluginData, event.sessionId, os.environ)
        found = found_media(original, transcript)
    except (OSError, ValueError) as exc:
        report_error(f"transcript not read for images ({exc}); the stored records alone are used")
        found = found_media(original, None)
    if not found:
        return messages
    noted, files = with_notes(messages, found, archive_dir)
    if not files:
        return noted
    try:
        write_archive(files, max_bytes=MAX_ARCHIVE_BYTES, max_age_days=MAX_ARCHIVE_AGE_DAYS)
        return noted
    except (OSError, ValueError) as exc:
        report_error(f"images not archived ({exc}); their notes say to re-run the tool instead")
    return with_notes(messages, found, None)[0]
