"""A whole document whose format is not known yet: detected, then read by its shape (a transcript,
a loglines export, a list of records, of SessionMessages or of ``{role, blocks}`` messages)."""

from __future__ import annotations

import json
from typing import Any

from ...errors import TranscriptError
from ..messages import MessageError, SessionMessage, parse_messages
from .assembler import Assembler
from .records import parse_records, parse_transcript_with_stats
from .stats import CONVERSATION_TYPES, KNOWN_RECORD_TYPES, TranscriptStats

ACCEPTED_FORMATS = (
    "expected a Claude Code transcript (JSONL, one record per line), "
    'a {"loglines": [...]} export of such records, '
    "a JSON list of SessionMessage objects ({role, text, toolUses, toolResults}), "
    "or a JSON list of {role, blocks} conversation messages"
)


def _parse_blocks_conversation(items: list[dict[str, Any]], source: str) -> list[SessionMessage]:
    """The lossless-compaction ``[{role, blocks}]`` format: calls and results pair by position."""
    pending: list[str] = []  # ids of calls still waiting for a result, oldest first
    calls = 0
    orphans = 0
    assembler = Assembler(TranscriptStats())
    for number, item in enumerate(items, start=1):
        role = item.get("role")
        blocks = item.get("blocks")
        if role not in CONVERSATION_TYPES or not isinstance(blocks, list):
            raise TranscriptError(f"{source}: item {number} is not a {{role, blocks}} user/assistant message")
        normalised: list[Any] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                given = block.get("id")
                calls += 1
                # The stable synthetic id depends only on the call's position in the file.
                tool_use_id = given if isinstance(given, str) else f"toolu_pos_{calls}"
                pending.append(tool_use_id)
                block = {**block, "id": tool_use_id}
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                given = block.get("tool_use_id")
                if isinstance(given, str):
                    if given in pending:
                        pending.remove(given)
                    tool_use_id = given
                elif pending:
                    tool_use_id = pending.pop(0)
                else:
                    orphans += 1
                    tool_use_id = f"toolu_pos_orphan_{orphans}"
                content = block.get("content", block.get("text"))
                is_error = block.get("is_error", block.get("isError")) is True
                block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error}
            normalised.append(block)
        assembler.add(role, None, normalised, place=f"{source}: item {number}")
    return assembler.finish()


def _looks_like_session_message(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and "role" in item
        and "content" not in item
        and "blocks" not in item
        and any(key in item for key in ("text", "toolUses", "toolResults"))
    )


def _describe(doc: Any) -> str:
    if isinstance(doc, dict):
        return f"a JSON object with keys {', '.join(sorted(map(str, doc))[:8]) or '(none)'}"
    if isinstance(doc, list):
        first = doc[0]
        if isinstance(first, dict):
            return f"a JSON list whose first item has keys {', '.join(sorted(map(str, first))[:8]) or '(none)'}"
        return f"a JSON list whose first item is a {type(first).__name__}"
    return f"a JSON {type(doc).__name__}"


def _unrecognised(source: str, what: str) -> TranscriptError:
    return TranscriptError(f"{source}: not a recognised conversation format (found {what}); {ACCEPTED_FORMATS}")


def _load_list(doc: list[Any], source: str) -> list[SessionMessage]:
    if not doc:
        return []
    if all(isinstance(i, dict) and "role" in i and "blocks" in i for i in doc):
        return _parse_blocks_conversation(doc, source)
    if all(_looks_like_session_message(i) for i in doc):
        try:
            return parse_messages(doc)
        except MessageError as exc:
            raise TranscriptError(f"{source}: invalid SessionMessage at {exc.location}: {exc.what}") from None
    if all(isinstance(i, dict) and i.get("type") in KNOWN_RECORD_TYPES for i in doc):
        # A bare array of Claude Code records: the loglines export without its wrapper.
        return parse_records(doc, source).messages
    raise _unrecognised(source, _describe(doc))


def load_messages(text: str, source: str = "<stdin>") -> list[SessionMessage]:
    """Detect the format of a whole document and read its conversation."""
    body = text.lstrip("\ufeff")
    if not body.strip():
        raise TranscriptError(f"{source}: empty document; {ACCEPTED_FORMATS}")
    # Only "\n" ends a JSONL record: str.splitlines would also split on U+2028 and friends,
    # which may sit raw inside JSON strings.
    lines = body.split("\n")
    try:
        doc: Any = json.loads(body)
    except json.JSONDecodeError as whole:
        first = next(line for line in lines if line.strip())
        try:
            json.loads(first)
        except json.JSONDecodeError:
            # The first line is not a record either: report the error of the document as a
            # whole (a broken pretty-printed JSON file), at its own line.
            raise TranscriptError(f"{source}:{whole.lineno}: invalid JSON ({whole.msg})") from None
        return _load_jsonl(lines, source)
    if isinstance(doc, dict):
        loglines = doc.get("loglines")
        if isinstance(loglines, list):
            return parse_records(loglines, source).messages
        if doc.get("type") in KNOWN_RECORD_TYPES:
            return _load_jsonl(lines, source)  # a one-record transcript
        raise _unrecognised(source, _describe(doc))
    if isinstance(doc, list):
        return _load_list(doc, source)
    raise _unrecognised(source, _describe(doc))


def _load_jsonl(lines: list[str], source: str) -> list[SessionMessage]:
    parsed = parse_transcript_with_stats(lines, source)
    if not parsed.stats.recognised:
        raise TranscriptError(
            f"{source}: JSON lines without any Claude Code record type (user, assistant, system, ...); "
            f"{ACCEPTED_FORMATS}"
        )
    return parsed.messages
