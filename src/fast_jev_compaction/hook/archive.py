"""Save the cut outputs of a compaction; when that fails, rebuild the markers without a path.

A marker must never point at a file that is not there: if the archive cannot be written, the
decisions stay and their markers say to re-run the tool instead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from ..compaction import CompactResult, shape_of
from ..conversation.messages import SessionMessage
from ..conversation.sizes import message_chars
from ..decide.archive import write_archive
from ..decide.rebuild import apply_decisions
from ..options import CompactOptions

ARCHIVE_DIR = "archive"
# Bounds of the plugin's archive folder; the oldest files go first.
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024
MAX_ARCHIVE_AGE_DAYS = 30.0


def saved_or_unpointed(
    result: CompactResult,
    messages: Sequence[SessionMessage],
    options: CompactOptions,
    report_error: Callable[[str], None],
) -> CompactResult:
    try:
        write_archive({**result.archive, **result.media}, max_bytes=MAX_ARCHIVE_BYTES, max_age_days=MAX_ARCHIVE_AGE_DAYS)
        return result
    except (OSError, ValueError) as exc:  # ValueError: a NUL or unencodable surrogate in the path
        report_error(f"cut outputs not archived ({exc}); markers say to re-run the tool instead")
    decisions = [replace(d, archive_path=None, input_archive_path=None) for d in result.decisions]
    # Rebuilt from the input: an old turn stays (its calls dropped with re-run markers), since
    # only a saved file could hold its replies.
    rebuilt = apply_decisions(messages, decisions, result.calls, shape_of(options))
    stats = replace(result.stats, chars_after=sum(message_chars(m) for m in rebuilt), evicted_turns=0, evicted_parts=0,
                    prompts_archived=0, prompts_folded=0, command_output_cut=False)
    return CompactResult(rebuilt, decisions, result.calls, stats, {})
