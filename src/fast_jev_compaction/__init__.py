"""fast-jev-compaction: compact Claude Code sessions by deciding what stays, not by summarising.

Attributes load on first use, so importing a submodule (as the hook does) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "SessionMessage": "conversation.messages",
    "ToolUse": "conversation.messages",
    "ToolResult": "conversation.messages",
    "CompactOptions": "options",
    "resolve_options": "options",
    "compact": "compaction",
    "compact_sync": "compaction",
    "CompactResult": "compaction",
    "CallDecision": "decide.decisions",
    "CompactStats": "stats",
    "summarize": "stats",
    "decision_log_lines": "stats",
    "JevAsker": "state.asker",
    "AskResult": "state.asker",
    "Usage": "state.asker",
    "read_messages": "conversation.transcript",
    "load_messages": "conversation.transcript",
    "LocalJudge": "judge.local",
    "JevClient": "jev.client",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fast_jev_compaction' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
