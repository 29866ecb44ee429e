"""The decision-log audit: a SQLite record of every compaction and per-call decision.

Only the store (with its schema and spill entries) and the redacted previews live here (stdlib
only, imported by the hook; the redactor itself is ``fast_jev_compaction.redaction``); the text
rendering for ``fast-jev log``/``stats`` is in ``audit.report``, and ``fast-jev report``'s session
summary and HTML page in ``audit.session`` and ``audit.html``.
"""

from __future__ import annotations

from ..redaction import redact_text
from .redact import preview
from .store import (
    FALLBACK_REASONS,
    CompactionRow,
    DecisionLog,
    DecisionLogBusy,
    DecisionLogError,
    DecisionRow,
    Totals,
    default_db_path,
    open_log,
    record_or_spill,
)

__all__ = [
    "FALLBACK_REASONS",
    "CompactionRow",
    "DecisionLog",
    "DecisionLogBusy",
    "DecisionLogError",
    "DecisionRow",
    "Totals",
    "default_db_path",
    "open_log",
    "preview",
    "record_or_spill",
    "redact_text",
]
