"""Small hand-made sessions for the evaluation tests: each says in words what it exercises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult, ToolUse

# Ten words of ordinary length: every 8-word window of it is a distinctive shingle.
SENTENCE = "parse tokens from the stream while skipping every whitespace token quietly"
LONG_ID = "dep_9f8e7d6c5b4a39281706afbe"


def prompt(text: str) -> SessionMessage:
    return SessionMessage(role="user", text=text)


def said(text: str) -> SessionMessage:
    return SessionMessage(role="assistant", text=text)


def call(tool_use_id: str, tool: str, text: str = "", **inputs: Any) -> SessionMessage:
    return SessionMessage(role="assistant", text=text, toolUses=(ToolUse(tool_use_id=tool_use_id, tool=tool, input=inputs),))


def result(tool_use_id: str, text: str, is_error: bool = False) -> SessionMessage:
    return SessionMessage(role="user", toolResults=(ToolResult(tool_use_id=tool_use_id, text=text, isError=is_error),))


def filler(n: int, start: int = 0) -> list[SessionMessage]:
    """Turns that reuse nothing: a small Bash call and its answer each."""
    out: list[SessionMessage] = []
    for k in range(start, start + n):
        out += [call(f"f{k}", "Bash", command=f"echo step {k}"), result(f"f{k}", f"step {k}")]
    return out


def reuse_session(reused: bool, big: int = 3000, name: str = "s") -> list[SessionMessage]:
    """A Read whose numbered lines come back (or not) as an Edit's old_string near the end."""
    body = "\n".join(f"{n:>6}→{line}" for n, line in enumerate([SENTENCE, *["x = 1"] * (big // 6)], 1))
    later = [call(f"{name}e", "Edit", file_path="/src/parser.py", old_string=SENTENCE, new_string="pass")] if reused else [
        call(f"{name}e", "Edit", file_path="/src/other.py", old_string="a", new_string="b")
    ]
    return [
        prompt("Fix the parser so whitespace is handled"),
        call(f"{name}r", "Read", file_path="/src/parser.py"),
        result(f"{name}r", body),
        *filler(6),
        *later,
        result(f"{name}e", "The file has been updated."),
        said("Done."),
    ]


def write_session(path: Path, messages: list[SessionMessage]) -> Path:
    path.write_text(json.dumps([m.to_wire() for m in messages]), encoding="utf-8")
    return path


class Transcript:
    """Claude Code JSONL records of one session, chained by parentUuid."""

    def __init__(self, session_id: str, started: str = "2026-01-01T00:00:00Z") -> None:
        self.session_id = session_id
        self.started = started  # every record's timestamp
        self.records: list[dict[str, Any]] = []

    def _add(self, kind: str, message: dict[str, Any]) -> None:
        uuid = f"{self.session_id}-{len(self.records)}"
        parent = self.records[-1]["uuid"] if self.records else None
        self.records.append({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": self.session_id,
                             "timestamp": self.started, "message": message})

    def prompt(self, text: str) -> "Transcript":
        self._add("user", {"role": "user", "content": text})
        return self

    def said(self, text: str) -> "Transcript":
        self._add("assistant", {"id": f"m{len(self.records)}", "role": "assistant", "content": [{"type": "text", "text": text}]})
        return self

    def tool(self, tool_use_id: str, name: str, output: str, **inputs: Any) -> "Transcript":
        self._add("assistant", {"id": f"m{len(self.records)}", "role": "assistant",
                                "content": [{"type": "tool_use", "id": tool_use_id, "name": name, "input": inputs}]})
        self._add("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": output}]})
        return self

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in self.records), encoding="utf-8")
        return path
