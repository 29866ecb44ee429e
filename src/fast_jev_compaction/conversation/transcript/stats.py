"""What a reading found: the messages, and the counts of what it skipped or brought back.

The record types Claude Code writes live here because they decide whether a JSONL document is a
transcript at all (:attr:`TranscriptStats.recognised`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..messages import SessionMessage

# Record types Claude Code writes; any of them marks a JSONL document as a transcript even when
# it holds no conversation yet.
KNOWN_RECORD_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "attachment",
        "progress",
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "permission-mode",
        "last-prompt",
        "custom-title",
        "ai-title",
        "mode",
        "bridge-session",
    }
)
CONVERSATION_TYPES = frozenset({"user", "assistant"})


@dataclass
class TranscriptStats:
    """What the reader skipped, so callers can report it instead of losing it silently."""

    lines: int = 0
    """Non-blank lines (or list items) seen."""
    non_object_lines: int = 0
    """Valid JSON that is not an object (a string, number or array)."""
    untyped_records: int = 0
    """Objects without a usable string ``type``."""
    record_types: Counter[str] = field(default_factory=Counter)
    """Every typed record in the input, by type (before any selection)."""
    skipped_types: Counter[str] = field(default_factory=Counter)
    """Live records that are not conversation (attachment, progress, system, ...)."""
    malformed_records: int = 0
    """user/assistant records whose ``message``/``content`` has an unusable shape."""
    conversation: int = 0
    """user/assistant records turned into (part of) a message."""
    sidechain_skipped: int = 0
    compact_boundaries: int = 0
    records_before_boundary: int = 0
    """Records (of any type) left behind by the last compaction."""
    preserved_records: int = 0
    """Pre-boundary records brought back because the boundary lists them as preserved."""
    duplicate_tool_uses: int = 0
    """tool_use blocks dropped because an earlier block already used their id."""
    subagent: bool = False
    """Every conversation record is a sidechain: a subagent transcript."""

    @property
    def recognised(self) -> bool:
        """Whether any record had a type Claude Code writes."""
        return any(t in KNOWN_RECORD_TYPES for t in self.record_types)


@dataclass
class TranscriptParse:
    messages: list[SessionMessage]
    stats: TranscriptStats
