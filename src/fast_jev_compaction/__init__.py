"""fast-jev-compaction: compact Claude Code sessions by deciding what stays, not by summarising."""

from __future__ import annotations

__version__ = "0.1.0"
