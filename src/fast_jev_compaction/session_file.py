"""Compacted messages as a Claude Code session file (JSONL) that ``claude --resume`` loads.

Each message becomes one record, chained by ``uuid``/``parentUuid`` from the first to the last;
an assistant turn keeps its text, its raw extra blocks and its tool_use blocks, and the results
follow in the next user record, so every tool pair stays together. Usage is zeroed: these
records were not produced by a model request. Claude Code finds the file by its name, so write
it as ``~/.claude/projects/<project folder>/<session id>.jsonl``.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from .messages import SessionMessage

ZERO_USAGE = {
    "input_tokens": 0,
    "output_tokens": 0,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
}


def _assistant_content(message: SessionMessage) -> list[dict[str, Any]]:
    extras = message.extra.get("extraBlocks") or []
    blocks: list[dict[str, Any]] = [b for b in extras if isinstance(b, dict)]
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    blocks += [{"type": "tool_use", "id": u.tool_use_id, "name": u.tool, "input": u.input} for u in message.toolUses]
    return blocks or [{"type": "text", "text": ""}]


def _user_content(message: SessionMessage) -> str | list[dict[str, Any]]:
    extras = [b for b in message.extra.get("extraBlocks") or [] if isinstance(b, dict)]
    # A result the reader kept whole carries its content as written (a cut one is a new result).
    results = [
        {"type": "tool_result", "tool_use_id": r.tool_use_id, "content": r.extra.get("content", r.text),
         "is_error": bool(r.isError)}
        for r in message.toolResults or ()
    ]
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
        yield record
        parent = record_id


def transcript_lines(
    messages: Sequence[SessionMessage], session_id: str | None = None, cwd: str | None = None
) -> Iterator[str]:
    """The session file, line by line."""
    for record in transcript_records(messages, session_id, cwd):
        yield json.dumps(record, ensure_ascii=False) + "\n"
