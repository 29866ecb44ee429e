"""Decision-log rows for a ``fast-jev compact --log`` run (the hook writes its own in ``hook/record``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..decide.rules import RULE_NAMES
from .redact import preview
from .store import CompactionRow, DecisionLog, DecisionRow


def record_cli_compaction(path: Path, session_id: str, judge: str, result: Any) -> int:
    """Record one CLI compaction (trigger ``cli``, outcome ``replaced``); returns its number."""
    stats = result.stats
    row = CompactionRow(
        session_id=session_id,
        trigger="cli",
        outcome="replaced",
        judge=judge,
        messages_before=stats.messages_before,
        messages_after=stats.messages_after,
        chars_before=stats.chars_before,
        chars_after=stats.chars_after,
        freed_chars=max(0, stats.chars_before - stats.chars_after),
        stage=stats.state_stage,
        requests=stats.requests,
        retries=stats.retries,
        failed_batches=stats.failed_batches,
        input_tokens=stats.input_tokens,
        output_tokens=stats.output_tokens,
        duration_ms=round(stats.ms),
    )
    inputs = {call.tool_use_id: call.input for call in result.calls}
    decisions = [
        DecisionRow(
            tool_use_id=d.tool_use_id,
            call_id=d.id,
            tool=d.tool,
            action=d.action,
            reason=d.reason,
            keep_call=d.keep_call,
            keep_result=d.keep_result,
            input_preview=preview(inputs.get(d.tool_use_id, {})),
            chars_freed=d.chars_freed,
            rule=d.reason if d.reason in RULE_NAMES else None,
            # Where the cut output and the moved input were saved, as the hook records them.
            archive_path=d.archive_path,
            input_archive_path=d.input_archive_path,
        )
        for d in result.decisions
    ]
    with DecisionLog(path) as log:
        return log.record(row, decisions)
