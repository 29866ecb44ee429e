"""Compacted messages as a Claude Code session file (JSONL) that ``claude --resume`` loads.

Each message becomes one record, chained by ``uuid``/``parentUuid`` from the first to the last;
an assistant turn keeps its text, its raw extra blocks and its tool_use blocks, and the results
follow in the next user record, so every tool pair stays together. Usage is zeroed: these
records were not produced by a model request. Claude Code finds the file by its name, so write
it as ``~/.claude/projects/<project folder>/<session id>.jsonl``.

What a pass did not change comes back as the transcript wrote it: a call's and a result's
blocks with their own members (``messages.BLOCK_FIELDS``), a result's content as written (tool
references, images, a list of text items), and the record of a result with its own fields
(``toolUseResult`` among them, ``messages.RECORD_FIELDS``). A result a pass cut, or whose
call's input it moved to the archive, is a new result without them: ``toolUseResult`` holds
the tool's whole structured output (a Read's file, an Edit's original file, a Write's
content), so writing it beside a cut would bring back what the cut took out, and Claude Code
then shows the result from its content, the marker included. The session's own fields
(``sessionId``, ``cwd``, ``version``, ``gitBranch``, ...) and the ids are the writer's: this is a
new session.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from .messages import BLOCK_FIELDS, BLOCK_LAYOUT, RECORD_FIELDS, SessionMessage, ToolResult
from .stored import unstored
from .transcript import result_text

ZERO_USAGE = {
    "input_tokens": 0,
    "output_tokens": 0,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
}


def _laid_out(message: SessionMessage, results: list[dict[str, Any]]) -> list[Any] | None:
    """The message's blocks in the order it was read in (``messages.BLOCK_LAYOUT``), or None
    when it has none or no longer fits it (a pass changed its text or its blocks)."""
    layout = message.extra.get(BLOCK_LAYOUT)
    if layout is None:
        return None
    extras = list(message.extra.get("extraBlocks") or ())
    uses = [_use_block(u) for u in message.toolUses]
    texts = [code if isinstance(code, int) else code[0] for code in layout if not isinstance(code, str)]
    pieces = _split(message.text, texts)
    counts = [sum(1 for code in layout if code == kind) for kind in ("x", "u", "r")]
    if pieces is None or counts != [len(extras), len(uses), len(results)]:
        return None
    taken = {"x": iter(extras), "u": iter(uses), "r": iter(results)}
    made = iter(pieces)
    out: list[Any] = []
    for code in layout:
        if isinstance(code, str):
            out.append(next(taken[code]))
        elif isinstance(code, int):
            out.append({"type": "text", "text": next(made)})
        else:
            out.append({"type": "text", "text": next(made), **code[1]})
    return out


def _split(text: str, lengths: list[int]) -> list[str] | None:
    """``text`` cut into pieces of these lengths, joined by blank lines; None when it is not."""
    pieces, at = [], 0
    for n, length in enumerate(lengths):
        if n and text[at:at + 2] != "\n\n":
            return None
        at += 2 if n else 0
        pieces.append(text[at:at + length])
        at += length
    return pieces if at == len(text) and (lengths or not text) else None


def _use_block(use: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": use.tool_use_id, "name": use.tool, "input": use.input, **use.extra.get(BLOCK_FIELDS, {})}


def _assistant_content(message: SessionMessage) -> list[dict[str, Any]]:
    laid = _laid_out(message, [])
    if laid is not None:
        return laid
    extras = message.extra.get("extraBlocks") or []
    blocks: list[dict[str, Any]] = [b for b in extras if isinstance(b, dict)]
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    blocks += [_use_block(u) for u in message.toolUses]
    return blocks or [{"type": "text", "text": ""}]


def _result_block(result: ToolResult) -> dict[str, Any]:
    """The tool_result block; a result the reader kept whole carries its content as written (a
    cut one is a new result), as long as that content still reads as the result's text."""
    content: Any = result.text
    raw = result.extra.get("content")
    if raw is not None and result_text(raw) == result.text:
        content = raw
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.tool_use_id, "content": content}
    if result.isError is not None:
        block["is_error"] = result.isError
    block.update(result.extra.get(BLOCK_FIELDS, {}))
    return block


def _record_fields(message: SessionMessage) -> dict[str, Any]:
    """The fields of the record the results came in, when every result still carries them (one
    cut or rebuilt result is a new one without them, and they describe the record as a whole);
    a prompt's, which it carries itself."""
    results = message.toolResults or ()
    if not results:
        return dict(unstored(message.extra.get(RECORD_FIELDS)) or {})  # a prompt's own
    fields = results[0].extra.get(RECORD_FIELDS)
    if not fields or any(r.extra.get(RECORD_FIELDS) is not fields for r in results):
        return {}
    return dict(unstored(fields))


def _user_content(message: SessionMessage) -> str | list[dict[str, Any]]:
    extras = [b for b in message.extra.get("extraBlocks") or [] if isinstance(b, dict)]
    results = [_result_block(r) for r in message.toolResults or ()]
    laid = _laid_out(message, results)
    if laid is not None:
        return laid
    if not results and not extras:
        return message.text
    text = [{"type": "text", "text": message.text}] if message.text else []
    return [*results, *extras, *text]


def transcript_records(
    messages: Sequence[SessionMessage], session_id: str | None = None, cwd: str | None = None
) -> Iterator[dict[str, Any]]:
    """One record per message, made as it is asked for."""
    session = session_id or str(uuid.uuid4())
    folder = cwd or os.getcwd()
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + "000Z"
    parent: str | None = None
    calls: frozenset[str] = frozenset()  # the ids of the calls of the record before
    for message in messages:
        record_id = str(uuid.uuid4())
        record: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": folder,
            "sessionId": session,
            "type": message.role,
            "uuid": record_id,
            "timestamp": stamp,
        }
        if message.role == "assistant":
            stop = "tool_use" if message.toolUses else "end_turn"
            record["message"] = {
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "role": "assistant",
                "model": "<synthetic>",
                "content": _assistant_content(message),
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": dict(ZERO_USAGE),
            }
        else:
            record["message"] = {"role": "user", "content": _user_content(message)}
            if message.extra.get("isMeta"):
                record["isMeta"] = True
            results = message.toolResults or ()
            if results and parent is not None and all(r.tool_use_id in calls for r in results):
                record["sourceToolAssistantUUID"] = parent
            for name, value in _record_fields(message).items():
                record.setdefault(name, value)
        yield record
        parent = record_id
        calls = frozenset(u.tool_use_id for u in message.toolUses)


def transcript_lines(
    messages: Sequence[SessionMessage], session_id: str | None = None, cwd: str | None = None
) -> Iterator[str]:
    """The session file, line by line."""
    for record in transcript_records(messages, session_id, cwd):
        yield json.dumps(record, ensure_ascii=False) + "\n"
