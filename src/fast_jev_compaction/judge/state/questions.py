"""A question's name and instructions read for the call and the tool it asks about."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

_CALL_NAME = re.compile(r"^(call|result)_(.+)$")
_CALL_INSTR_TOOL = re.compile(r"tool call (\S+) \(([^()]*)\)", re.IGNORECASE)
_RESULT_INSTR = re.compile(r"tool call (\S+) \(([^()]*?),\s*(\d+)\s*chars\)", re.IGNORECASE)


@dataclass(frozen=True)
class Question:
    name: str
    which: str  # "call" | "result" | ""
    call_id: str
    tool: str
    chars: int | None


def parse_question(name: str, question: Any) -> Question:
    instructions = question.get("instructions", "") if isinstance(question, Mapping) else ""
    instructions = instructions if isinstance(instructions, str) else ""
    which, call_id = "", ""
    match = _CALL_NAME.match(name)
    if match:
        which, call_id = match.group(1), match.group(2)
    tool, chars = "", None
    result_match = _RESULT_INSTR.search(instructions)
    if result_match:
        tool, chars = result_match.group(2).strip(), int(result_match.group(3))
        call_id = call_id or result_match.group(1)
        which = which or "result"
    else:
        call_match = _CALL_INSTR_TOOL.search(instructions)
        if call_match:
            tool = call_match.group(2).strip()
            call_id = call_id or call_match.group(1)
            which = which or "call"
    return Question(name=name, which=which, call_id=call_id, tool=tool, chars=chars)
