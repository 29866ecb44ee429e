"""Turn one hook outcome into decision-log rows (``fast_jev_compaction.audit``).

One compaction row per hook run, whatever the outcome, and one decision row per decided call,
pinned ones included, so ``fast-jev log`` can say why any tool call stayed or went. A run that
failed has no pipeline stats; its row takes the judge figures from the outcome's tally and the
time from the whole hook run, so a failed Jev run is not logged as free.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..audit.redact import preview
from ..audit.store import CompactionRow, DecisionRow, record_or_spill
from ..decide.rules import RULE_NAMES
from ..private_files import make_private_dirs
from ..redaction import redact_text
from ..textutil import escape_unwritable

if TYPE_CHECKING:
    from .event import HookEvent
    from .log import HookLog
    from .outcome import Outcome


def _text(value: str) -> str:
    # What the host sent may hold a lone surrogate or a NUL, which SQLite's text cannot.
    return escape_unwritable(value)


def rows_for(event: "HookEvent | None", outcome: "Outcome") -> tuple[CompactionRow, Iterable[DecisionRow]]:
    result: Any = outcome.result
    row = CompactionRow(
        session_id=_text(event.sessionId if event and event.sessionId else ""),
        trigger=_text(event.trigger if event else ""),
        outcome=outcome.action,
        # A reason can quote an error body or the input; it goes through the one redactor.
        reason=_text(redact_text(outcome.reason)),
        judge=outcome.judge or "none",
        agent_id=_text(event.agentId) if event and event.agentId else None,
        fallback_reason=outcome.category if outcome.action == "fallback" else None,
    )
    if result is None:
        if event is not None:
            from ..conversation.sizes import message_chars

            row.messages_before = row.messages_after = len(event.messages)
            row.chars_before = row.chars_after = sum(message_chars(m) for m in event.messages)
        tally = outcome.tally
        if tally is not None:
            row.requests, row.retries, row.failed_batches = tally.requests, tally.retries, tally.failed
            row.input_tokens, row.output_tokens = tally.input_tokens, tally.output_tokens
        row.duration_ms = outcome.ms
        return row, ()
    stats = result.stats
    row.messages_before = stats.messages_before
    row.chars_before = stats.chars_before
    row.stage = stats.state_stage
    row.requests = stats.requests
    row.retries = stats.retries
    row.failed_batches = stats.failed_batches
    row.input_tokens = stats.input_tokens
    row.output_tokens = stats.output_tokens
    row.duration_ms = round(stats.ms)
    if outcome.action == "replaced":
        row.messages_after = stats.messages_after
        row.chars_after = stats.chars_after
        row.freed_chars = max(0, stats.chars_before - stats.chars_after)
    else:
        # A fallback leaves the conversation as it was: nothing was freed.
        row.messages_after = stats.messages_before
        row.chars_after = stats.chars_before
    return row, _DecisionRows(result, outcome.action == "replaced")


class _DecisionRows:
    """An outcome's decision rows, each made as it is written: a session's hundred thousand
    calls are never all alive as rows. Walked once per attempt at the write."""

    def __init__(self, result: Any, replaced: bool) -> None:
        self.result = result
        self.replaced = replaced

    def __iter__(self) -> Iterator[DecisionRow]:
        calls = {call.tool_use_id: call for call in self.result.calls}
        # A fallback changed nothing: it freed nothing, and nothing it decided points at an archive.
        replaced = self.replaced
        for decision in self.result.decisions:
            call = calls.get(decision.tool_use_id)
            yield DecisionRow(
                tool_use_id=_text(decision.tool_use_id),
                call_id=_text(decision.id),
                tool=_text(decision.tool),
                action=decision.action,
                reason=decision.reason,
                keep_call=decision.keep_call,
                keep_result=decision.keep_result,
                input_preview=_text(preview(call.input if call else {})),
                chars_freed=decision.chars_freed if replaced else 0,
                result_chars=call.result_chars if call else None,
                rule=decision.reason if decision.reason in RULE_NAMES else None,
                archive_path=decision.archive_path if replaced else None,
                input_archive_path=decision.input_archive_path if replaced else None,
            )


def record_outcome(path: Path, event: "HookEvent | None", outcome: "Outcome") -> int | Path:
    """The row's id, or the spill entry it went to when the log stayed locked past its budget."""
    row, decisions = rows_for(event, outcome)
    return record_or_spill(path, row, decisions)


DECISIONS_DB = "decisions.sqlite"


def record_decisions(event: "HookEvent | None", outcome: "Outcome", directory: Path | None, log: "HookLog") -> None:
    """One row per compaction and one per decided call; a failing log never changes the answer."""
    if directory is None:
        log.error("decision log not written (no usable plugin data folder)")
        return
    try:
        make_private_dirs(directory)
        # Created 0600 before SQLite opens it: its -wal and -shm files copy the database's mode.
        os.close(os.open(directory / DECISIONS_DB, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        written = record_outcome(directory / DECISIONS_DB, event, outcome)
        if isinstance(written, Path):
            log.info(f"decision log busy past its budget; row kept in {written.name} for the next write")
    except Exception as exc:  # a locked or broken database must not cost the compaction
        log.error(f"decision log not written ({type(exc).__name__}: {exc})")
