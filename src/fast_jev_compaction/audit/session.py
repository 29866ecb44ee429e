"""One session's compactions as ``fast-jev report`` shows them (pure: rows in, summary out).

The log holds two vocabularies for the three outcomes: older rows say ``drop_result`` /
``drop_call``, newer ones ``truncate`` / ``drop``; both read as keep / truncate / drop here.
Columns added after schema 2 (a decision's ``rule`` and ``archive_path``, a compaction's reason
category) and 3 (a decision's ``input_archive_path``) are read when the row carries them, so an
older log renders without them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..decide.decisions import ACTIONS, action_name
from .report import EMPTY_STATE, format_pct, kept_out_tenths
from .store import CompactionRow, DecisionRow

KINDS = ACTIONS
# Reasons that only say "the judge's probabilities decided"; anything else names a rule.
_JUDGE_REASONS = frozenset({"", "kept", "result_dropped", "call_dropped", "judge", "threshold", "budget"})


def decision_kind(action: str) -> str:
    """keep / truncate / drop for either vocabulary; an unknown action is shown as it is."""
    return action_name(action)


def decision_rule(decision: DecisionRow) -> str | None:
    """The rule that decided this call (``pinned``, ``superseded-reread``...), or None for the judge."""
    if decision.rule:
        return decision.rule
    return None if decision.reason in _JUDGE_REASONS else decision.reason


def archive_path(decision: DecisionRow) -> str | None:
    return decision.archive_path or None


def input_archive_path(decision: DecisionRow) -> str | None:
    return decision.input_archive_path or None


def reason_category(compaction: CompactionRow) -> str:
    """The fallback's category when recorded (logs from before migration 2 have none), else the reason."""
    return compaction.fallback_reason or compaction.reason or "(no reason given)"


@dataclass(frozen=True)
class Compaction:
    row: CompactionRow
    decisions: tuple[DecisionRow, ...]

    def counts(self) -> dict[str, int]:
        counted = Counter(decision_kind(d.action) for d in self.decisions)
        return {kind: counted.get(kind, 0) for kind in KINDS}


@dataclass(frozen=True)
class SessionSummary:
    """Totals over one session. Context sizes and call counts cover *replaced* compactions only,
    as in ``fast-jev stats``: a fallback or a skip frees nothing."""

    session_id: str
    compactions: tuple[Compaction, ...]

    def outcomes(self) -> dict[str, int]:
        counted = Counter(c.row.outcome for c in self.compactions)
        return {name: counted.get(name, 0) for name in ("replaced", "fallback", "skipped")}

    def fallback_reasons(self) -> list[tuple[str, str, int]]:
        """(outcome, reason category, count) for every compaction that did not replace."""
        counted = Counter(
            (c.row.outcome, reason_category(c.row)) for c in self.compactions if c.row.outcome != "replaced"
        )
        return sorted(((o, r, n) for (o, r), n in counted.items()), key=lambda x: (-x[2], x[0], x[1]))

    def replaced(self) -> list[Compaction]:
        return [c for c in self.compactions if c.row.outcome == "replaced"]

    def chars(self) -> tuple[int, int, int]:
        """(before, after, freed) over replaced compactions."""
        rows = [c.row for c in self.replaced()]
        return (
            sum(r.chars_before for r in rows),
            sum(r.chars_after for r in rows),
            sum(r.freed_chars for r in rows),
        )

    def counts(self) -> dict[str, int]:
        total: Counter[str] = Counter({kind: 0 for kind in KINDS})
        for compaction in self.replaced():
            total.update(compaction.counts())
        return {kind: total[kind] for kind in KINDS}

    def kept_out_pct(self) -> str | None:
        """The strict kept-out percentage, or None when no compaction replaced anything."""
        before, _, freed = self.chars()
        tenths = kept_out_tenths(freed, before) if self.replaced() else None
        return None if tenths is None else format_pct(tenths)

    def kept_out(self) -> str:
        """The strict kept-out line, or the empty-state sentence."""
        pct = self.kept_out_pct()
        if pct is None:
            return EMPTY_STATE
        before, _, freed = self.chars()
        return f"{pct} kept out of context ({freed:,} of {before:,} chars freed)"

    def headline(self) -> str:
        outcomes = self.outcomes()
        return (
            f"session {self.session_id}: {len(self.compactions):,} compaction(s) "
            f"({outcomes['replaced']:,} replaced, {outcomes['fallback']:,} fallback, "
            f"{outcomes['skipped']:,} skipped)"
        )


def summarise(session_id: str, rows: Sequence[tuple[CompactionRow, Sequence[DecisionRow]]]) -> SessionSummary:
    return SessionSummary(session_id, tuple(Compaction(row, tuple(ds)) for row, ds in rows))


def shrink_pct(before: int, after: int) -> str | None:
    """How much smaller the context got, one decimal and never a rounded 100 %; None unmeasured."""
    tenths = kept_out_tenths(max(0, before - after), before)
    return None if tenths is None else format_pct(tenths)


SUMMARY_LINES = 10


def _session_text(summary: SessionSummary) -> list[str]:
    counts = summary.counts()
    lines = [
        summary.headline(),
        f"  {summary.kept_out()}",
        f"  calls: {counts['keep']:,} keep, {counts['truncate']:,} truncate, {counts['drop']:,} drop",
    ]
    for outcome, reason, times in summary.fallback_reasons():
        lines.append(f"  {outcome} ×{times:,}: {reason}")
    hidden = len(summary.compactions) - SUMMARY_LINES
    if hidden > 0:
        lines.append(f"  … {hidden:,} earlier compaction(s); --html FILE shows them all")
    for c in summary.compactions[-SUMMARY_LINES:]:
        row, n = c.row, c.counts()
        lines.append(
            f"  #{row.id} {row.created_at} {row.outcome}: chars {row.chars_before:,} → {row.chars_after:,}, "
            f"{n['keep']} keep · {n['truncate']} truncate · {n['drop']} drop"
        )
    return lines


def summary_text(sessions: Sequence[SessionSummary], source: str) -> str:
    """``fast-jev report`` without ``--html``, one screen at most: one session in a few lines and
    its newest ``SUMMARY_LINES`` compactions, or several sessions (newest first) a line each."""
    if not sessions:
        return f"No compactions recorded yet ({source}).\n"
    if len(sessions) == 1:
        return "\n".join(_session_text(sessions[0])) + "\n"
    lines = []
    for session in sessions[:SUMMARY_LINES]:
        pct = session.kept_out_pct()
        lines.append(f"{session.headline()}; " + (f"{pct} kept out" if pct else "nothing freed yet"))
    if len(sessions) > SUMMARY_LINES:
        lines.append(f"… {len(sessions) - SUMMARY_LINES:,} more session(s); --html FILE shows them all")
    return "\n".join(lines) + "\n"
