"""The decision log: one SQLite file recording every compaction and every per-call decision.

Concurrency contract (context-mode ADR-0001, adapted): several Claude Code windows write the same
file, so the store is multi-writer: WAL journal, ``busy_timeout`` and a *bounded* retry on
SQLITE_BUSY, and never an exclusive locking mode. Our caveat: the hook has a ~60 s budget, so the
busy wait is short (2 s) and the whole write, retries included, is capped at ``budget_s`` (4.5 s);
past that we raise ``DecisionLogBusy`` rather than hang or silently drop the row.

Stdlib only (sqlite3): the hook imports this on its hot path.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from .redact import PREVIEW_LIMIT, clip, redact_text

# 2: decisions.result_chars (the call's result size, for `fast-jev report`).
SCHEMA_VERSION = 2
DEFAULT_BUSY_TIMEOUT_MS = 2000
DEFAULT_RETRY_DELAYS_S: tuple[float, ...] = (0.05, 0.2, 0.8)
# Busy waits + sleeps of one write never exceed this, far below the hook's ~60 s timeout.
DEFAULT_BUDGET_S = 4.5

OUTCOMES = ("replaced", "fallback", "skipped")

T = TypeVar("T")


class DecisionLogError(Exception):
    """The decision log cannot be used (not a decision-log database, bad row)."""


class DecisionLogBusy(DecisionLogError):
    """Another writer held the database lock for longer than the whole retry budget."""

    def __init__(self, path: Path, attempts: int, cause: BaseException) -> None:
        self.path = path
        self.attempts = attempts
        self.cause = cause
        super().__init__(
            f"decision log {path} is locked by another writer: gave up after {attempts} "
            f"attempt(s) ({cause})"
        )


@dataclass(kw_only=True)
class CompactionRow:
    """One compaction attempt. ``freed_chars`` counts only chars that were in the context."""

    session_id: str
    trigger: str
    outcome: str  # one of OUTCOMES
    reason: str = ""
    judge: str = "local"
    agent_id: str | None = None
    messages_before: int = 0
    messages_after: int = 0
    chars_before: int = 0
    chars_after: int = 0
    freed_chars: int = 0
    stage: str = ""
    requests: int = 0
    retries: int = 0
    failed_batches: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    duration_ms: int = 0
    created_at: str = ""  # ISO 8601 UTC; filled in by record() when empty
    id: int | None = None  # set when read back


@dataclass(kw_only=True)
class DecisionRow:
    """One per-call decision of a compaction."""

    tool_use_id: str
    call_id: str  # the short id the judge saw, e.g. "t3"
    tool: str
    action: str  # "keep" | "truncate" | "drop" (logs written before 0.2: "drop_result" | "drop_call")
    reason: str = ""  # "kept" | "pinned" | "result_dropped" | "call_dropped" | ...
    keep_call: float | None = None
    keep_result: float | None = None
    input_preview: str = ""  # redacted, at most PREVIEW_LIMIT chars
    chars_freed: int = 0
    result_chars: int | None = None  # the result's size; None in logs written before schema 2
    compaction_id: int | None = None  # set when read back


@dataclass(frozen=True, kw_only=True)
class Totals:
    """Aggregates over compactions. Context sizes count *replaced* compactions only."""

    sessions: int = 0
    compactions: int = 0
    replaced: int = 0
    fallback: int = 0
    skipped: int = 0
    chars_before: int = 0  # replaced only: what was in the context
    chars_after: int = 0  # replaced only
    freed_chars: int = 0  # replaced only: fallbacks and skips free nothing
    requests: int = 0  # judge work is spent whatever the outcome, so these count all
    retries: int = 0
    failed_batches: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    duration_ms: int = 0
    kept: int = 0  # decisions of replaced compactions
    truncated: int = 0
    dropped: int = 0
    pinned: int = 0
    reasons: tuple[tuple[str, str, int], ...] = ()  # (outcome, reason, count), not replaced
    judges: tuple[tuple[str, int], ...] = ()  # (judge, compactions)
    first_at: str | None = None
    last_at: str | None = None


_COMPACTION_FIELDS = tuple(f.name for f in fields(CompactionRow) if f.name != "id")
_DECISION_FIELDS = tuple(f.name for f in fields(DecisionRow) if f.name != "compaction_id")
_INT_FIELDS = (
    "messages_before",
    "messages_after",
    "chars_before",
    "chars_after",
    "freed_chars",
    "requests",
    "retries",
    "failed_batches",
    "input_tokens",
    "output_tokens",
    "duration_ms",
)

# Every column has a constant default so a missing one can be added with ALTER TABLE.
_COMPACTION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("created_at", "TEXT NOT NULL DEFAULT ''"),
    ("session_id", "TEXT NOT NULL DEFAULT ''"),
    ("agent_id", "TEXT"),
    ("trigger", "TEXT NOT NULL DEFAULT ''"),
    ("outcome", "TEXT NOT NULL DEFAULT ''"),
    ("reason", "TEXT NOT NULL DEFAULT ''"),
    ("judge", "TEXT NOT NULL DEFAULT ''"),
    *((name, "INTEGER NOT NULL DEFAULT 0") for name in _INT_FIELDS[:5]),
    ("stage", "TEXT NOT NULL DEFAULT ''"),
    *((name, "INTEGER NOT NULL DEFAULT 0") for name in _INT_FIELDS[5:]),
)
_DECISION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("tool_use_id", "TEXT NOT NULL DEFAULT ''"),
    ("call_id", "TEXT NOT NULL DEFAULT ''"),
    ("tool", "TEXT NOT NULL DEFAULT ''"),
    ("input_preview", "TEXT NOT NULL DEFAULT ''"),
    ("keep_call", "REAL"),
    ("keep_result", "REAL"),
    ("action", "TEXT NOT NULL DEFAULT ''"),
    ("reason", "TEXT NOT NULL DEFAULT ''"),
    ("chars_freed", "INTEGER NOT NULL DEFAULT 0"),
    ("result_chars", "INTEGER"),
)
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS compactions_session ON compactions(session_id, id)",
    "CREATE INDEX IF NOT EXISTS decisions_compaction ON decisions(compaction_id)",
    "CREATE INDEX IF NOT EXISTS decisions_tool_use ON decisions(tool_use_id)",
)


def _now_iso() -> str:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    # Extended codes (SQLITE_BUSY_SNAPSHOT, ...) keep the primary code in the low byte.
    if isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    message = str(exc).lower()
    return "database is locked" in message or "database table is locked" in message or "busy" in message


def default_db_path(env: Mapping[str, str] = os.environ) -> Path:
    """Where the hook writes the log and where ``fast-jev log``/``stats`` read it.

    ``FAST_JEV_DB``; else ``$CLAUDE_PLUGIN_DATA/decisions.sqlite``; else the newest existing
    ``<claude dir>/plugins/data/fast-jev-compaction*/decisions.sqlite`` (the data dir name depends
    on the marketplace the plugin came from); else the inline-plugin location, which may not exist.
    ``<claude dir>`` is ``$CLAUDE_CONFIG_DIR`` when set (Claude Code moves its data there), else
    ``~/.claude``.
    """
    explicit = env.get("FAST_JEV_DB")
    if explicit:
        return Path(explicit).expanduser()
    plugin_data = env.get("CLAUDE_PLUGIN_DATA")
    if plugin_data:
        return Path(plugin_data).expanduser() / "decisions.sqlite"
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    if config_dir:
        claude_dir = Path(config_dir).expanduser()
    else:
        home = env.get("HOME") or env.get("USERPROFILE")
        claude_dir = (Path(home) if home else Path.home()) / ".claude"
    data_dir = claude_dir / "plugins" / "data"
    candidates = [p for p in data_dir.glob("fast-jev-compaction*/decisions.sqlite") if p.is_file()]
    if candidates:
        return max(candidates, key=lambda p: (p.stat().st_mtime, str(p)))
    return data_dir / "fast-jev-compaction-inline" / "decisions.sqlite"


class DecisionLog:
    """The decision log over one SQLite file. Use as a context manager, or call ``close()``.

    ``create=False`` refuses to create a missing file (``FileNotFoundError``) and refuses a SQLite
    file that holds other tables but no decision log (``DecisionLogError``), so a read-only command
    pointed at the wrong file never writes our schema into it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        retry_delays: Sequence[float] = DEFAULT_RETRY_DELAYS_S,
        budget_s: float = DEFAULT_BUDGET_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = Path(path).expanduser()
        self.busy_timeout_ms = int(busy_timeout_ms)
        self.retry_delays = tuple(float(d) for d in retry_delays)
        self.budget_s = float(budget_s)
        self._sleep = sleep
        if not create and not self.path.exists():
            raise FileNotFoundError(f"no decision log at {self.path}")
        if self.path.is_dir():
            raise DecisionLogError(f"{self.path} is a directory, not a decision log file")
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE) so none is left open by
        # the driver holding a lock between calls.
        self._conn = sqlite3.connect(
            str(self.path), timeout=self.busy_timeout_ms / 1000, isolation_level=None
        )
        try:
            self._configure()
            self._retry(lambda: self._migrate(create))
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise DecisionLogError(f"{self.path} is not a usable decision log: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> DecisionLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
            self._conn = None  # type: ignore[assignment]

    # -- setup -------------------------------------------------------------------------------

    def _set_busy_timeout(self, ms: int) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {max(0, int(ms))}")

    def _configure(self) -> None:
        # Set explicitly as well as through connect(timeout=): the value must read back (a driver
        # that dropped it once left busy_timeout at 0 upstream, #642).
        self._set_busy_timeout(self.busy_timeout_ms)
        self._retry(lambda: self._conn.execute("PRAGMA journal_mode = WAL").fetchone())
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute("PRAGMA foreign_keys = ON")

    def _migrate(self, create: bool) -> None:
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        if version >= SCHEMA_VERSION:
            return  # the common path: no write lock taken just to open
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not create and tables and "compactions" not in tables:
            raise DecisionLogError(f"{self.path} is a SQLite database but not a fast-jev decision log")
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
            if version < SCHEMA_VERSION:
                self._create_schema()
                self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    def _create_schema(self) -> None:
        conn = self._conn
        conn.execute(
            "CREATE TABLE IF NOT EXISTS compactions (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            + ", ".join(f"{name} {decl}" for name, decl in _COMPACTION_COLUMNS)
            + ")"
        )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS decisions (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "compaction_id INTEGER NOT NULL REFERENCES compactions(id) ON DELETE CASCADE, "
            + ", ".join(f"{name} {decl}" for name, decl in _DECISION_COLUMNS)
            + ")"
        )
        # Tables made by an earlier build may lack columns; add them rather than fail later.
        for table, columns in (("compactions", _COMPACTION_COLUMNS), ("decisions", _DECISION_COLUMNS)):
            have = {r[1] for r in conn.execute(f"PRAGMA table_xinfo({table})")}
            for name, decl in columns:
                if name not in have:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
        for statement in _INDEXES:
            conn.execute(statement)

    # -- retry -------------------------------------------------------------------------------

    def _retry(self, op: Callable[[], T]) -> T:
        """Run ``op``; on SQLITE_BUSY sleep and retry, bounded by the delays and the budget."""
        deadline = time.monotonic() + self.budget_s
        attempts = 0
        shrunk = False
        last: sqlite3.OperationalError | None = None
        try:
            while True:
                attempts += 1
                try:
                    return op()
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    last = exc
                if attempts > len(self.retry_delays):
                    break
                delay = self.retry_delays[attempts - 1]
                if deadline - time.monotonic() <= delay:
                    break
                self._sleep(delay)  # a real sleep: waiting must not burn the CPU
                # The next busy wait only gets what is left of the budget.
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    break
                self._set_busy_timeout(min(self.busy_timeout_ms, remaining_ms))
                shrunk = True
        finally:
            if shrunk and self._conn is not None:
                self._set_busy_timeout(self.busy_timeout_ms)
        assert last is not None  # only reached after a busy failure
        raise DecisionLogBusy(self.path, attempts, last) from last

    # -- writes ------------------------------------------------------------------------------

    def record(self, compaction: CompactionRow, decisions: Sequence[DecisionRow] = ()) -> int:
        """Write a compaction and its decisions in one transaction; return the compaction id."""
        values = _compaction_values(compaction)
        decision_values = [_decision_values(d) for d in decisions]
        columns = ", ".join(_COMPACTION_FIELDS)
        marks = ", ".join("?" for _ in _COMPACTION_FIELDS)
        d_columns = ", ".join(("compaction_id", *_DECISION_FIELDS))
        d_marks = ", ".join("?" for _ in range(1 + len(_DECISION_FIELDS)))

        def write() -> int:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                cursor = conn.execute(f"INSERT INTO compactions ({columns}) VALUES ({marks})", values)
                compaction_id = int(cursor.lastrowid or 0)
                conn.executemany(
                    f"INSERT INTO decisions ({d_columns}) VALUES ({d_marks})",
                    [(compaction_id, *row) for row in decision_values],
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return compaction_id

        return self._retry(write)

    # -- reads -------------------------------------------------------------------------------

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        return self._retry(lambda: self._conn.execute(sql, tuple(params)).fetchall())

    def compactions(self, session_id: str | None = None, last: int | None = None) -> list[CompactionRow]:
        """Compactions oldest first; ``last`` keeps only the newest N (still oldest first)."""
        if last is not None and last < 0:
            raise ValueError("last must be >= 0")
        where, params = ("WHERE session_id = ?", [session_id]) if session_id is not None else ("", [])
        sql = f"SELECT id, {', '.join(_COMPACTION_FIELDS)} FROM compactions {where} ORDER BY id DESC"
        if last is not None:
            sql += " LIMIT ?"
            params.append(last)
        return [_compaction_from(row) for row in reversed(self._rows(sql, params))]

    def decisions_for(self, compaction_id: int) -> list[DecisionRow]:
        """The decisions of one compaction, in the order they were recorded."""
        sql = (
            f"SELECT compaction_id, {', '.join(_DECISION_FIELDS)} FROM decisions "
            "WHERE compaction_id = ? ORDER BY id"
        )
        return [_decision_from(row) for row in self._rows(sql, [compaction_id])]

    def why(self, tool_use_id: str) -> list[tuple[CompactionRow, DecisionRow]]:
        """Every decision ever taken about one tool call, newest first, with its compaction."""
        c_cols = ", ".join(f"c.{name}" for name in ("id", *_COMPACTION_FIELDS))
        d_cols = ", ".join(f"d.{name}" for name in ("compaction_id", *_DECISION_FIELDS))
        sql = (
            f"SELECT {c_cols}, {d_cols} FROM decisions d JOIN compactions c ON c.id = d.compaction_id "
            "WHERE d.tool_use_id = ? ORDER BY c.id DESC, d.id DESC"
        )
        width = 1 + len(_COMPACTION_FIELDS)
        return [
            (_compaction_from(row[:width]), _decision_from(row[width:]))
            for row in self._rows(sql, [tool_use_id])
        ]

    def totals(self, session_id: str | None = None) -> Totals:
        """Aggregates for one session, or over every session when ``session_id`` is None."""
        where, params = ("WHERE session_id = ?", [session_id]) if session_id is not None else ("", [])
        replaced_sum = ", ".join(
            f"COALESCE(SUM(CASE WHEN outcome = 'replaced' THEN {name} END), 0)"
            for name in ("chars_before", "chars_after", "freed_chars")
        )
        work_sum = ", ".join(f"COALESCE(SUM({name}), 0)" for name in _INT_FIELDS[5:])
        head = self._rows(
            "SELECT COUNT(DISTINCT session_id), COUNT(*), "
            "COALESCE(SUM(outcome = 'replaced'), 0), COALESCE(SUM(outcome = 'fallback'), 0), "
            f"COALESCE(SUM(outcome = 'skipped'), 0), {replaced_sum}, {work_sum}, "
            f"MIN(created_at), MAX(created_at) FROM compactions {where}",
            params,
        )[0]
        numbers = [_int(v) for v in head[:14]]
        d_where = "AND c.session_id = ?" if session_id is not None else ""
        actions = self._rows(
            "SELECT "
            "COALESCE(SUM(d.action = 'keep' AND d.reason != 'pinned'), 0), "
            "COALESCE(SUM(d.action IN ('truncate', 'drop_result')), 0), "
            "COALESCE(SUM(d.action IN ('drop', 'drop_call')), 0), "
            "COALESCE(SUM(d.reason = 'pinned'), 0) "
            "FROM decisions d JOIN compactions c ON c.id = d.compaction_id "
            f"WHERE c.outcome = 'replaced' {d_where}",
            params,
        )[0]
        reasons = self._rows(
            f"SELECT outcome, reason, COUNT(*) FROM compactions {where} "
            f"{'AND' if where else 'WHERE'} outcome != 'replaced' "
            "GROUP BY outcome, reason ORDER BY COUNT(*) DESC, outcome, reason",
            params,
        )
        judges = self._rows(
            f"SELECT judge, COUNT(*) FROM compactions {where} GROUP BY judge ORDER BY COUNT(*) DESC, judge",
            params,
        )
        return Totals(
            sessions=numbers[0],
            compactions=numbers[1],
            replaced=numbers[2],
            fallback=numbers[3],
            skipped=numbers[4],
            chars_before=numbers[5],
            chars_after=numbers[6],
            freed_chars=numbers[7],
            requests=numbers[8],
            retries=numbers[9],
            failed_batches=numbers[10],
            input_tokens=numbers[11],
            output_tokens=numbers[12],
            duration_ms=numbers[13],
            kept=_int(actions[0]),
            truncated=_int(actions[1]),
            dropped=_int(actions[2]),
            pinned=_int(actions[3]),
            reasons=tuple((str(o), str(r), _int(n)) for o, r, n in reasons),
            judges=tuple((str(j), _int(n)) for j, n in judges),
            first_at=None if head[14] is None else str(head[14]),
            last_at=None if head[15] is None else str(head[15]),
        )


# -- row conversion ------------------------------------------------------------------------


def _int(value: object) -> int:
    # SQL aggregates come back as int, or None over zero rows.
    return value if isinstance(value, int) else 0


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DecisionLogError(f"{name} must be a non-negative int, got {value!r}")
    return value


def _score(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise DecisionLogError(f"{name} must be a probability in [0, 1] or None, got {value!r}")
    return float(value)


def _compaction_values(row: CompactionRow) -> tuple[object, ...]:
    if row.outcome not in OUTCOMES:
        raise DecisionLogError(f"outcome must be one of {OUTCOMES}, got {row.outcome!r}")
    for name in _INT_FIELDS:
        _count(name, getattr(row, name))
    if row.outcome != "replaced" and row.freed_chars:
        # A fallback leaves the conversation untouched: claiming freed chars would inflate stats.
        raise DecisionLogError(f"a {row.outcome} compaction frees nothing (freed_chars={row.freed_chars})")
    if row.freed_chars > row.chars_before:
        raise DecisionLogError(
            f"freed_chars ({row.freed_chars}) cannot exceed chars_before ({row.chars_before})"
        )
    values = {name: getattr(row, name) for name in _COMPACTION_FIELDS}
    values["created_at"] = row.created_at or _now_iso()
    return tuple(values[name] for name in _COMPACTION_FIELDS)


def _decision_values(row: DecisionRow) -> tuple[object, ...]:
    _count("chars_freed", row.chars_freed)
    if row.result_chars is not None:
        _count("result_chars", row.result_chars)
    # Defence in depth: the preview is meant to arrive redacted, but the file must never hold
    # a secret or an unbounded blob even when a caller forgot.
    values = {name: getattr(row, name) for name in _DECISION_FIELDS}
    values["input_preview"] = clip(redact_text(row.input_preview), PREVIEW_LIMIT)
    values["keep_call"] = _score("keep_call", row.keep_call)
    values["keep_result"] = _score("keep_result", row.keep_result)
    return tuple(values[name] for name in _DECISION_FIELDS)


def _compaction_from(row: Sequence[object]) -> CompactionRow:
    data = dict(zip(("id", *_COMPACTION_FIELDS), row))
    return CompactionRow(**data)  # type: ignore[arg-type]


def _decision_from(row: Sequence[object]) -> DecisionRow:
    data = dict(zip(("compaction_id", *_DECISION_FIELDS), row))
    return DecisionRow(**data)  # type: ignore[arg-type]
