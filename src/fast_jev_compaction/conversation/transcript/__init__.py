"""Read conversations from disk or stdin into ``SessionMessage`` lists.

The main input is a Claude Code transcript (JSONL, one record per line). ``load_messages`` also
accepts the other conversation shapes found in the corpus: a ``{"loglines": [...]}`` export, a
JSON list of SessionMessage objects and the lossless-compaction ``[{role, blocks}]`` format.

The output mirrors what Claude Code hands a compaction hook: one message per model turn (the
streamed fragments of one ``message.id`` merged), ``handle`` = record uuid, and every ToolUse
carrying a copy of its outcome.

The reading, from a file to the messages: ``files`` (a file, streamed when it can be),
``documents`` (a whole document, its shape detected), ``records`` (Claude Code records, the live
part only: ``boundaries``), ``assembler`` (records into messages), ``blocks`` and ``layout`` (one
block's content, the blocks' order); ``stats`` counts what was skipped.
"""

from __future__ import annotations

from ...errors import TranscriptError
from .blocks import record_fields, result_text
from .documents import ACCEPTED_FORMATS, load_messages
from .files import read_messages
from .records import parse_records, parse_transcript, parse_transcript_with_stats
from .stats import TranscriptParse, TranscriptStats

__all__ = [
    "ACCEPTED_FORMATS",
    "TranscriptError",
    "TranscriptParse",
    "TranscriptStats",
    "load_messages",
    "parse_records",
    "parse_transcript",
    "parse_transcript_with_stats",
    "read_messages",
    "record_fields",
    "result_text",
]
