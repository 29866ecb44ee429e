"""Pure renderers for ``fast-jev log`` and ``fast-jev stats`` (no I/O, no database).

Stats follow context-mode ADR-0004 (strict compression): only chars that were in the context
count, i.e. ``chars_before`` of *replaced* compactions; fallbacks and skips free nothing. With
nothing measured we say so and draw no percentage, and a percentage never over-claims: it has one
decimal and shows 100.0% only when everything was freed.
"""

from __future__ import annotations

import json as _json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import PurePath
from typing import Any

from ..decide.decisions import action_name
from .store import CompactionRow, DecisionRow, Totals
from .table import PLAIN_REASONS, render, target, why

LOG_HEADERS = ("call", "tool", "target", "decision", "rule / probabilities", "freed")

EMPTY_STATE = (
    "No compaction has freed context yet — numbers appear after the first replaced compaction."
)
RULE = "─" * 3


def kept_out_tenths(freed: int, before: int) -> int | None:
    """freed/before in tenths of a percent, or None when nothing was measured.

    Rounds half up with integer arithmetic (no float artefacts), except that anything short of
    everything stays at 99.9: 99.96% freed is not "100.0%".
    """
    if before <= 0:
        return None
    freed = max(0, min(freed, before))  # the store enforces this; never draw more than 100%
    tenths = (freed * 2000 + before) // (2 * before)
    if tenths >= 1000 and freed < before:
        return 999
    return tenths


def format_pct(tenths: int) -> str:
    return f"{tenths // 10}.{tenths % 10}%"


def kept_out_line(totals: Totals) -> str:
    """The headline: the strict kept-out percentage, or the empty-state sentence."""
    tenths = kept_out_tenths(totals.freed_chars, totals.chars_before) if totals.replaced else None
    if tenths is None:
        return EMPTY_STATE
    return (
        f"{format_pct(tenths)} kept out of context "
        f"({totals.freed_chars:,} of {totals.chars_before:,} chars freed)"
    )


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


def _duration(ms: int) -> str:
    return f"{ms:,} ms" if ms < 10_000 else f"{ms / 1000:,.1f} s"


def _section(totals: Totals) -> list[str]:
    lines = [f"  {kept_out_line(totals)}"]
    if totals.compactions == 0:
        lines.append("  compactions: none recorded")
        return lines
    lines.append(
        f"  compactions: {totals.compactions:,} ({totals.replaced:,} replaced, "
        f"{totals.fallback:,} fallback, {totals.skipped:,} skipped)"
    )
    if totals.fallback_reasons:
        by_reason = ", ".join(f"{reason} {n:,}" for reason, n in totals.fallback_reasons)
        lines.append(f"  fallbacks by reason: {by_reason}")
    for outcome, reason, count in totals.reasons:
        lines.append(f"    {outcome} ×{count:,}: {reason or '(no reason given)'}")
    lines.append(
        f"  calls: {totals.kept:,} kept, {totals.truncated:,} truncated, "
        f"{totals.dropped:,} dropped, {totals.pinned:,} pinned"
    )
    judges = ", ".join(f"{name or '?'} {n:,}" for name, n in totals.judges)
    lines.append(
        f"  judge: {_plural(totals.requests, 'request')}, "
        f"{_plural(totals.retries, 'retry', 'retries')}, "
        f"{_plural(totals.failed_batches, 'failed batch', 'failed batches')}; "
        f"compactions by judge: {judges}"
    )
    lines.append(f"  tokens: {totals.input_tokens:,} in, {totals.output_tokens:,} out")
    lines.append(f"  time: {_duration(totals.duration_ms)} spent compacting")
    return lines


def format_stats(
    totals: Totals, session_id: str | None = None, lifetime: Totals | None = None
) -> str:
    """``fast-jev stats``. ``totals`` are the session's when ``session_id`` is given, and the
    all-sessions ``lifetime`` totals then get their own section so the two never mix."""
    if session_id is None:
        head = f"{RULE} All sessions ({_plural(totals.sessions, 'session')}) {RULE}"
        return "\n".join([head, *_section(totals)]) + "\n"
    lines = [f"{RULE} Session {session_id} {RULE}", *_section(totals)]
    if lifetime is not None:
        lines += [
            "",
            f"{RULE} Lifetime, all sessions ({_plural(lifetime.sessions, 'session')}) {RULE}",
            *_section(lifetime),
        ]
    return "\n".join(lines) + "\n"


def _totals_doc(totals: Totals) -> dict[str, Any]:
    doc = asdict(totals)
    doc["reasons"] = [{"outcome": o, "reason": r, "count": n} for o, r, n in totals.reasons]
    doc["judges"] = {name: n for name, n in totals.judges}
    doc["fallback_reasons"] = {reason: n for reason, n in totals.fallback_reasons}
    tenths = kept_out_tenths(totals.freed_chars, totals.chars_before) if totals.replaced else None
    doc["kept_out_pct"] = None if tenths is None else tenths / 10
    doc["summary"] = kept_out_line(totals)
    return doc


def stats_document(
    totals: Totals,
    session_id: str | None = None,
    lifetime: Totals | None = None,
    db: str | None = None,
) -> dict[str, Any]:
    """The ``stats --json`` document; ``kept_out_pct`` is null in the empty state."""
    doc: dict[str, Any] = {"db": db, "session_id": session_id}
    if session_id is None:
        doc["lifetime"] = _totals_doc(totals)
    else:
        doc["session"] = _totals_doc(totals)
        doc["lifetime"] = None if lifetime is None else _totals_doc(lifetime)
    return doc


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def decision_line(d: DecisionRow) -> str:
    """``t3 Read drop call=0.10 result=0.10 freed 1,234 chars  {"file_path":"src/a.py"}``"""
    reason = "" if d.reason in PLAIN_REASONS else f" [{d.reason}]"
    line = (
        f"{d.call_id} {d.tool} {action_name(d.action)}{reason} call={_score(d.keep_call)} "
        f"result={_score(d.keep_result)} freed {d.chars_freed:,} chars"
    )
    return f"{line}  {d.input_preview}" if d.input_preview else line


def decisions_table(rows: Sequence[DecisionRow], indent: str = "    ") -> list[str]:
    """A compaction's decisions as an aligned table: call, tool, target, decision, why, freed."""
    if not rows:
        return [f"{indent}(no per-call decisions)"]
    table = render(
        LOG_HEADERS,
        [
            [d.call_id, d.tool, target(d.input_preview or None), action_name(d.action),
             why(d.reason, d.keep_call, d.keep_result), f"{d.chars_freed:,}"]
            for d in rows
        ],
        {"freed"},
    )
    return [f"{indent}{line}" for line in table.splitlines()]


def _saved_line(rows: Sequence[DecisionRow], indent: str = "    ") -> list[str]:
    """Where a compaction's cuts were saved whole: the folder, once (``--why`` names each file)."""
    folders = sorted({str(PurePath(path).parent) for d in rows for path in (d.archive_path, d.input_archive_path) if path})
    if not folders:
        return []
    return [f"{indent}saved whole in {', '.join(folders)}; `fast-jev log --why CALL` names a call's file"]


def _decision_doc(d: DecisionRow) -> dict[str, Any]:
    return {**asdict(d), "decision": action_name(d.action)}


def _compaction_head(c: CompactionRow) -> str:
    agent = f"  agent {c.agent_id}" if c.agent_id else ""
    return f"#{c.id}  {c.created_at}  session {c.session_id}{agent}  trigger {c.trigger}  judge {c.judge}"


def _compaction_body(c: CompactionRow) -> list[str]:
    outcome = f"  {c.outcome}" + (f": {c.reason}" if c.reason else "")
    sizes = (
        f"  messages {c.messages_before:,} → {c.messages_after:,}, "
        f"chars {c.chars_before:,} → {c.chars_after:,} (freed {c.freed_chars:,})"
    )
    work = (
        f"  stage {c.stage or '-'}, {_plural(c.requests, 'request')}, "
        f"{_plural(c.retries, 'retry', 'retries')}, "
        f"{_plural(c.failed_batches, 'failed batch', 'failed batches')}, "
        f"tokens {c.input_tokens:,} in / {c.output_tokens:,} out, {_duration(c.duration_ms)}"
    )
    return [outcome, sizes, work]


def _group(
    decisions: Mapping[int, Sequence[DecisionRow]] | Iterable[DecisionRow],
) -> dict[int, list[DecisionRow]]:
    if isinstance(decisions, Mapping):
        return {int(k): list(v) for k, v in decisions.items()}
    grouped: dict[int, list[DecisionRow]] = {}
    for d in decisions:
        if d.compaction_id is not None:
            grouped.setdefault(d.compaction_id, []).append(d)
    return grouped


def format_log(
    compactions: Sequence[CompactionRow],
    decisions: Mapping[int, Sequence[DecisionRow]] | Iterable[DecisionRow],
    json: bool = False,  # noqa: A002 - mirrors the --json flag
) -> str:
    """``fast-jev log``: one block per compaction, its decisions one per line.

    ``decisions`` is either ``{compaction_id: [DecisionRow, ...]}`` or a flat iterable of rows
    carrying ``compaction_id``.
    """
    grouped = _group(decisions)
    if json:
        doc = {
            "compactions": [
                {**asdict(c), "decisions": [_decision_doc(d) for d in grouped.get(c.id or 0, [])]}
                for c in compactions
            ]
        }
        return _json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    if not compactions:
        return "No compactions recorded yet.\n"
    blocks = []
    for c in compactions:
        rows = grouped.get(c.id or 0, [])
        lines = [_compaction_head(c), *_compaction_body(c)]
        lines += decisions_table(rows)
        lines += _saved_line(rows)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def format_why(
    results: Sequence[tuple[CompactionRow, DecisionRow]],
    tool_use_id: str | None = None,
    json: bool = False,  # noqa: A002 - mirrors the --json flag
) -> str:
    """``fast-jev log --why ID``: every decision about one tool call, newest first."""
    if json:
        doc = {
            "tool_use_id": tool_use_id,
            "decisions": [{"compaction": asdict(c), "decision": _decision_doc(d)} for c, d in results],
        }
        return _json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    name = tool_use_id or (results[0][1].tool_use_id if results else "?")
    if not results:
        return f"No decision recorded about tool call {name}.\n"
    lines = [f"{name}: {_plural(len(results), 'decision')}, newest first"]
    for c, d in results:
        lines.append(f"  {_compaction_head(c)}  {c.outcome}" + (f": {c.reason}" if c.reason else ""))
        lines.append(f"    {decision_line(d)}")
        # Where to read what the cut took: the output's file, and the moved input's.
        lines.extend(f"      {what} saved in {path}" for what, path in (("output", d.archive_path), ("input", d.input_archive_path)) if path)
    return "\n".join(lines) + "\n"
