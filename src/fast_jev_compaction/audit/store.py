"""The decision log: one SQLite file recording every compaction and every per-call decision.

Concurrency contract (context-mode ADR-0001, adapted): several Claude Code windows write the same
file, so the store is multi-writer: WAL journal, ``busy_timeout`` and a *bounded* retry on
SQLITE_BUSY, and never an exclusive locking mode. Our caveat: the hook has a ~60 s budget, so the
busy wait is short (2 s) and the whole write, retries included, is capped at ``budget_s`` (4.5 s);
past that we raise ``DecisionLogBusy`` rather than hang or silently drop the row.

A row that still cannot be written goes to a spill entry beside the file (``audit.spill``,
``record_or_spill``) and the next write replays it, so a long-held lock loses no row. The schema
and its migrations are in ``audit.schema``.

Stdlib only (sqlite3): the hook imports this on its hot path.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from ..private_files import FILE_MODE, make_private_dirs
from ..redaction import redact_text
from . import spill
from .redact import PREVIEW_LIMIT, clip
from .schema import MIGRATIONS, SCHEMA_VERSION, refusal, user_version

DEFAULT_BUSY_TIMEOUT_MS = 2000
DEFAULT_RETRY_DELAYS_S: tuple[float, ...] = (0.05, 0.2, 0.8)
# Busy waits + sleeps of one write never exceed this, far below the hook's ~60 s timeout.
DEFAULT_BUDGET_S = 4.5

# The log is bounded like the archive: compactions older than KEEP_DAYS, any beyond the newest
# KEEP_COMPACTIONS, and the oldest of those whose decisions pass the newest KEEP_DECISIONS (the
# size: a long session's compaction holds thousands, some 300 bytes each) go with their
# decisions, and the file gives back the pages they took. Checked on every PRUNE_EVERY-th write,
# so a hook run rarely pays for the delete.
KEEP_DAYS = 90
KEEP_COMPACTIONS = 20_000
KEEP_DECISIONS = 1_000_000
PRUNE_EVERY = 64

OUTCOMES = ("replaced", "fallback", "skipped")
# Why a compaction fell back, as counted by ``fast-jev stats``. "python-not-ready" and
# "broken-interpreter" are seen only by the mod, which spills their rows (audit.spill).
FALLBACK_REASONS = (
    "below-ratio",
    "below-target",
    "judge-error",
    "budget",
    "deadline",
    "python-not-ready",
    "broken-interpreter",
    "bad-input",
    "internal",
)

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
    fallback_reason: str | None = None  # one of FALLBACK_REASONS for a fallback; None otherwise
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
    result_chars: int | None = None  # the call's output size; None in logs from before migration 2
    rule: str | None = None  # the deterministic rule that settled the call, if one did
    archive_path: str | None = None  # where the call's full output was archived, if it was
    input_archive_path: str | None = None  # where its moved input was archived; None before migration 3
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
    fallback_reasons: tuple[tuple[str, int], ...] = ()  # (FALLBACK_REASONS item or "unknown", count)
    judges: tuple[tuple[str, int], ...] = ()  # (judge, compactions)
    first_at: str | None = None
    last_at: str | None = None


_COMPACTION_FIELDS = tuple(f.name for f in fields(CompactionRow) if f.name != "id")
_DECISION_FIELDS = tuple(f.name for f in fields(DecisionRow) if f.name != "compaction_id")
# The counts of a compaction row (the dataclass says which fields are whole numbers).
_INT_FIELDS = tuple(f.name for f in fields(CompactionRow) if f.type == "int")
# Context sizes are summed over replaced compactions only (a fallback leaves the context as it was);
# the other counts Totals shares with a row measure work, spent whatever the outcome.
_REPLACED_SUMS = ("chars_before", "chars_after", "freed_chars")
_WORK_SUMS = tuple(
    name
    for name in _INT_FIELDS
    if name not in _REPLACED_SUMS and name in {f.name for f in fields(Totals)}
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

    Opening looks at the file before changing anything (``schema.refusal``): a newer schema or a
    foreign SQLite file raises ``DecisionLogError`` with one line and is left exactly as it was
    (not even switched to WAL). ``create=False`` also refuses to create a missing file
    (``FileNotFoundError``) or adopt a table-less one, so a read-only command pointed at the wrong
    file never writes our schema into it.
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
        fresh = False
        if create:
            make_private_dirs(self.path.parent)
            # SQLite creates a database 0644 and its WAL and shared-memory files with the
            # database's mode: created here first, 0600, all three are private whatever the umask.
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE))
                fresh = True
            except FileExistsError:
                pass
        # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE) so none is left open by
        # the driver holding a lock between calls.
        self._conn = sqlite3.connect(
            str(self.path), timeout=self.busy_timeout_ms / 1000, isolation_level=None
        )
        self._conn.row_factory = sqlite3.Row
        try:
            self._set_busy_timeout(self.busy_timeout_ms)
            self._refuse_if_foreign(create)
            self._configure(fresh)
            self._migrate(create)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise DecisionLogError(f"{self.path} is not a usable decision log: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise

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

    def _set_busy_timeout(self, ms: int) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {max(0, int(ms))}")

    def _refuse_if_foreign(self, create: bool) -> None:
        problem = self._retry(lambda: refusal(self._conn, create=create))
        if problem:
            raise DecisionLogError(f"{self.path} {problem}; left unchanged")

    def _configure(self, fresh: bool) -> None:
        # busy_timeout is set explicitly as well as through connect(timeout=): the value must
        # read back (a driver that dropped it once left busy_timeout at 0 upstream, #642).
        if fresh:  # before the first table, which only a new log lacks: a prune gives pages back
            self._conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self._retry(lambda: self._conn.execute("PRAGMA journal_mode = WAL").fetchone())
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute("PRAGMA foreign_keys = ON")

    def _migrate(self, create: bool) -> None:
        """Apply each pending migration in its own transaction, together with its version bump."""
        if self._retry(lambda: user_version(self._conn)) >= SCHEMA_VERSION:
            return  # the common path: no write lock taken just to open

        def step() -> bool:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Re-check under the write lock: another process (or a newer build) may have
                # migrated meanwhile.
                problem = refusal(conn, create=create)
                if problem:
                    raise DecisionLogError(f"{self.path} {problem}; left unchanged")
                version = user_version(conn)
                if version < SCHEMA_VERSION:
                    MIGRATIONS[version](conn)
                    conn.execute(f"PRAGMA user_version = {version + 1}")
                conn.execute("COMMIT")
                return version + 1 < SCHEMA_VERSION
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        while self._retry(step):
            pass

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

    # Writes: every write also replays the spill entries waiting beside the file, in the same
    # transaction, so they cost no extra lock and no extra budget.

    def record(self, compaction: CompactionRow, decisions: Iterable[DecisionRow] = ()) -> int:
        """Write a compaction and its decisions in one transaction; return the compaction id.

        ``decisions`` is walked once per attempt, each row checked as it is written (a row that
        would lie rolls the whole transaction back): a hook's hundred thousand calls are never
        all alive as rows.
        """
        values = _compaction_values(compaction)
        entries = self._spilled()

        def write() -> int:
            pruned = 0
            with self._transaction():
                replayed = self._insert_spilled(entries)
                compaction_id = self._insert(values, map(_decision_values, decisions))
                if compaction_id % PRUNE_EVERY == 0:
                    pruned = self._prune(KEEP_DAYS, KEEP_COMPACTIONS, KEEP_DECISIONS)
            if pruned:
                self._give_back()
            spill.remove(replayed)
            return compaction_id

        return self._retry(write)

    def replay_spill(self) -> int:
        """Write the spill entries waiting beside the file; return how many were taken in."""
        entries = self._spilled()
        if not entries:
            return 0

        def write() -> int:
            with self._transaction():
                replayed = self._insert_spilled(entries)
            spill.remove(replayed)
            return len(replayed)

        return self._retry(write)

    def prune(
        self, *, keep_days: float = KEEP_DAYS, keep_compactions: int = KEEP_COMPACTIONS,
        keep_decisions: int = KEEP_DECISIONS,
    ) -> int:
        """Delete compactions older than ``keep_days``, beyond the newest ``keep_compactions``, or
        older than the newest ``keep_decisions`` decisions, with their decisions; return how
        many compactions went."""

        def write() -> int:
            with self._transaction():
                pruned = self._prune(keep_days, keep_compactions, keep_decisions)
            if pruned:
                self._give_back()
            return pruned

        return self._retry(write)

    def _prune(self, keep_days: float, keep_compactions: int, keep_decisions: int) -> int:
        cutoff = datetime.fromtimestamp(time.time() - keep_days * 86400, timezone.utc)
        # created_at is ISO 8601 UTC text, so text order is time order; a row without one (written
        # by hand) is judged by its place only.
        cursor = self._conn.execute(
            "DELETE FROM compactions WHERE (created_at != '' AND created_at < ?) OR id <= "
            "(SELECT id FROM compactions ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (cutoff.strftime("%Y-%m-%dT%H:%M:%S"), max(0, keep_compactions)),
        )
        removed = cursor.rowcount
        # Decision ids only grow, and the oldest go first: those past the newest keep_decisions
        # are the ones at or below MAX(id) - keep_decisions. Their compactions go whole (a
        # compaction holding the boundary too), found through the primary key, not a count.
        removed += self._conn.execute(
            "DELETE FROM compactions WHERE id <= (SELECT compaction_id FROM decisions WHERE id <= "
            "(SELECT MAX(id) FROM decisions) - ? ORDER BY id DESC LIMIT 1)",
            (max(0, keep_decisions),),
        ).rowcount
        return removed

    def _give_back(self) -> None:
        """Return the pages a prune freed to the file system (a log made before auto_vacuum was
        set keeps its size). After the prune's transaction: run as a script, the pragma frees
        every page, where one statement step frees one. Best effort: the rows are written."""
        with contextlib.suppress(sqlite3.Error):
            self._conn.executescript("PRAGMA incremental_vacuum;")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _insert(
        self, values: dict[str, object], decisions: Iterable[dict[str, object]], spill_id: str | None = None
    ) -> int:
        conn = self._conn
        columns = {**values, "spill_id": spill_id}
        names = ", ".join(columns)
        marks = ", ".join(f":{name}" for name in columns)
        cursor = conn.execute(f"INSERT INTO compactions ({names}) VALUES ({marks})", columns)
        compaction_id = int(cursor.lastrowid or 0)
        d_names = ", ".join(("compaction_id", *_DECISION_FIELDS))
        d_marks = ", ".join(f":{name}" for name in ("compaction_id", *_DECISION_FIELDS))
        conn.executemany(
            f"INSERT INTO decisions ({d_names}) VALUES ({d_marks})",
            ({**d, "compaction_id": compaction_id} for d in decisions),
        )
        return compaction_id

    def _spilled(self) -> list[tuple[Path, str, dict[str, object], list[dict[str, object]]]]:
        """Readable, valid spill entries; the others are set aside for a human."""
        entries = []
        for path in spill.pending(self.path):
            doc = spill.load(path)
            if doc is None:
                spill.set_aside(path, only_if_older_than=spill.UNREADABLE_GRACE_S)
                continue
            try:
                compaction = _known(CompactionRow, doc["compaction"], drop=("id",))
                decisions = [_known(DecisionRow, d, drop=("compaction_id",)) for d in doc["decisions"]]
                values = _compaction_values(compaction)
                decision_values = [_decision_values(d) for d in decisions]
            except (DecisionLogError, TypeError, ValueError):
                spill.set_aside(path)
                continue
            entries.append((path, spill.entry_id(self.path, path), values, decision_values))
        return entries

    def _insert_spilled(
        self, entries: list[tuple[Path, str, dict[str, object], list[dict[str, object]]]]
    ) -> list[Path]:
        done: list[Path] = []
        for path, spill_id, values, decisions in entries:
            conn = self._conn
            if conn.execute("SELECT 1 FROM compactions WHERE spill_id = ?", (spill_id,)).fetchone():
                done.append(path)  # a replay interrupted after its commit left the file behind
                continue
            # One entry that cannot be stored (text SQLite refuses) must not sink the others or
            # the row being written with them.
            conn.execute("SAVEPOINT spill_entry")
            try:
                self._insert(values, decisions, spill_id)
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):
                    raise
                conn.execute("ROLLBACK TO spill_entry")
                spill.set_aside(path)
            except (sqlite3.Error, ValueError):  # UnicodeEncodeError is a ValueError
                conn.execute("ROLLBACK TO spill_entry")
                spill.set_aside(path)
            else:
                done.append(path)
            conn.execute("RELEASE spill_entry")
        return done

    # Reads: rows come back as dicts keyed by column name.

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        return self._retry(lambda: [dict(row) for row in self._conn.execute(sql, tuple(params)).fetchall()])

    def compactions(self, session_id: str | None = None, last: int | None = None) -> list[CompactionRow]:
        """Compactions oldest first; ``last`` keeps only the newest N (still oldest first)."""
        if last is not None and last < 0:
            raise ValueError("last must be >= 0")
        where = "WHERE session_id = ?" if session_id is not None else ""
        params: list[object] = [session_id] if session_id is not None else []
        sql = f"SELECT id, {', '.join(_COMPACTION_FIELDS)} FROM compactions {where} ORDER BY id DESC"
        if last is not None:
            sql += " LIMIT ?"
            params.append(last)
        return [_read(CompactionRow, row) for row in reversed(self._rows(sql, params))]

    def decisions_for(self, compaction_id: int) -> list[DecisionRow]:
        """The decisions of one compaction, in the order they were recorded."""
        sql = (
            f"SELECT compaction_id, {', '.join(_DECISION_FIELDS)} FROM decisions "
            "WHERE compaction_id = ? ORDER BY id"
        )
        return [_read(DecisionRow, row) for row in self._rows(sql, [compaction_id])]

    def why(self, tool_use_id: str) -> list[tuple[CompactionRow, DecisionRow]]:
        """Every decision ever taken about one tool call, newest first, with its compaction."""
        c_cols = ", ".join(f"c.{name} AS c_{name}" for name in ("id", *_COMPACTION_FIELDS))
        d_cols = ", ".join(f"d.{name} AS d_{name}" for name in ("compaction_id", *_DECISION_FIELDS))
        sql = (
            f"SELECT {c_cols}, {d_cols} FROM decisions d JOIN compactions c ON c.id = d.compaction_id "
            "WHERE d.tool_use_id = ? ORDER BY c.id DESC, d.id DESC"
        )
        return [
            (_read(CompactionRow, _prefixed(row, "c_")), _read(DecisionRow, _prefixed(row, "d_")))
            for row in self._rows(sql, [tool_use_id])
        ]

    def totals(self, session_id: str | None = None) -> Totals:
        """Aggregates for one session, or over every session when ``session_id`` is None."""
        where, params = ("WHERE session_id = ?", [session_id]) if session_id is not None else ("", [])
        replaced_sums = ", ".join(
            f"COALESCE(SUM(CASE WHEN outcome = 'replaced' THEN {name} END), 0) AS {name}"
            for name in _REPLACED_SUMS
        )
        work_sums = ", ".join(f"COALESCE(SUM({name}), 0) AS {name}" for name in _WORK_SUMS)
        head = self._rows(
            "SELECT COUNT(DISTINCT session_id) AS sessions, COUNT(*) AS compactions, "
            "COALESCE(SUM(outcome = 'replaced'), 0) AS replaced, "
            "COALESCE(SUM(outcome = 'fallback'), 0) AS fallback, "
            f"COALESCE(SUM(outcome = 'skipped'), 0) AS skipped, {replaced_sums}, {work_sums}, "
            f"MIN(created_at) AS first_at, MAX(created_at) AS last_at FROM compactions {where}",
            params,
        )[0]
        d_where = "AND c.session_id = ?" if session_id is not None else ""
        # Both spellings of the outcomes: old rows say drop_result/drop_call, new ones truncate/drop.
        actions = self._rows(
            "SELECT "
            "COALESCE(SUM(d.action = 'keep' AND d.reason != 'pinned'), 0) AS kept, "
            "COALESCE(SUM(d.action IN ('drop_result', 'truncate')), 0) AS truncated, "
            "COALESCE(SUM(d.action IN ('drop_call', 'drop')), 0) AS dropped, "
            "COALESCE(SUM(d.reason = 'pinned'), 0) AS pinned "
            "FROM decisions d JOIN compactions c ON c.id = d.compaction_id "
            f"WHERE c.outcome = 'replaced' {d_where}",
            params,
        )[0]
        and_where = "AND" if where else "WHERE"
        reasons = self._rows(
            f"SELECT outcome, reason, COUNT(*) AS n FROM compactions {where} {and_where} outcome != 'replaced' "
            "GROUP BY outcome, reason ORDER BY COUNT(*) DESC, outcome, reason",
            params,
        )
        fallback_reasons = self._rows(
            f"SELECT COALESCE(fallback_reason, 'unknown') AS category, COUNT(*) AS n FROM compactions {where} "
            f"{and_where} outcome = 'fallback' GROUP BY category ORDER BY COUNT(*) DESC, category",
            params,
        )
        judges = self._rows(
            f"SELECT judge, COUNT(*) AS n FROM compactions {where} GROUP BY judge ORDER BY COUNT(*) DESC, judge",
            params,
        )
        numbers = {name: _int(head[name]) for name in head if name not in ("first_at", "last_at")}
        return Totals(
            **numbers,
            **{name: _int(value) for name, value in actions.items()},
            reasons=tuple((str(r["outcome"]), str(r["reason"]), _int(r["n"])) for r in reasons),
            fallback_reasons=tuple((str(r["category"]), _int(r["n"])) for r in fallback_reasons),
            judges=tuple((str(r["judge"]), _int(r["n"])) for r in judges),
            first_at=None if head["first_at"] is None else str(head["first_at"]),
            last_at=None if head["last_at"] is None else str(head["last_at"]),
        )


def open_log(path: Path) -> DecisionLog | None:
    """The log for a reading command (``fast-jev log``/``stats``), spill entries replayed.

    None when there is nothing to show: no file and no spill entry. Spill entries without a file
    (the mod could not start Python before the first compaction) create the log, so they show.
    A lock held past the budget leaves them for later; the rows already written still show.
    """
    if not path.exists() and not spill.pending(path):
        return None
    log = DecisionLog(path, create=not path.exists())
    try:
        log.replay_spill()
    except DecisionLogBusy:
        pass
    return log


def record_or_spill(
    path: Path, compaction: CompactionRow, decisions: Iterable[DecisionRow] = (), **options: Any
) -> int | Path:
    """Record, or when the lock is not had within the budget, spill; the compaction id or the
    spill entry's path. Rows that would lie are refused (``DecisionLogError``) either way.
    ``decisions`` may be walked more than once (an iterable, not an iterator)."""
    values = _compaction_values(compaction)
    try:
        with DecisionLog(path, **options) as log:
            return log.record(compaction, decisions)
    except DecisionLogBusy:
        return spill.write(path, values, [_decision_values(d) for d in decisions])


# Rows to column values and back: checked on the way in (a row that would lie is refused), typed
# on the way out (a file edited by hand may hold anything in any column).


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


def _compaction_values(row: CompactionRow) -> dict[str, object]:
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
    if row.fallback_reason is not None and (
        row.outcome != "fallback" or row.fallback_reason not in FALLBACK_REASONS
    ):
        raise DecisionLogError(
            f"fallback_reason must be one of {FALLBACK_REASONS} on a fallback, got "
            f"{row.fallback_reason!r} on a {row.outcome}"
        )
    for name in ("session_id", "trigger", "reason", "judge", "stage", "created_at"):
        _text(name, getattr(row, name))
    _text("agent_id", row.agent_id, optional=True)
    values = {name: getattr(row, name) for name in _COMPACTION_FIELDS}
    values["created_at"] = row.created_at or _now_iso()
    return values


def _decision_values(row: DecisionRow) -> dict[str, object]:
    _count("chars_freed", row.chars_freed)
    if row.result_chars is not None:
        _count("result_chars", row.result_chars)
    for name in ("tool_use_id", "call_id", "tool", "action", "reason", "input_preview"):
        _text(name, getattr(row, name))
    _text("rule", row.rule, optional=True)
    _text("archive_path", row.archive_path, optional=True)
    _text("input_archive_path", row.input_archive_path, optional=True)
    # Defence in depth: the preview is meant to arrive redacted, but the file must never hold
    # a secret or an unbounded blob even when a caller forgot.
    values = {name: getattr(row, name) for name in _DECISION_FIELDS}
    values["input_preview"] = clip(redact_text(row.input_preview), PREVIEW_LIMIT)
    values["keep_call"] = _score("keep_call", row.keep_call)
    values["keep_result"] = _score("keep_result", row.keep_result)
    return values


def _text(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise DecisionLogError(f"{name} must be text, got {value!r}")


def _known(cls: Any, data: dict[str, Any], drop: tuple[str, ...]) -> Any:
    """A row from a spill entry: unknown keys are ignored, missing ones take their defaults."""
    names = {f.name for f in fields(cls)} - set(drop)
    return cls(**{k: v for k, v in data.items() if k in names})


def _read(cls: type[T], row: dict[str, Any]) -> T:
    """A row read back, each value of its field's type whatever the file holds: SQLite keeps any
    type in any column, and a log edited by hand (or by anyone who can write it) must still show."""
    return cls(**{name: _typed(_FIELD_TYPES[cls][name], value) for name, value in row.items()})


def _typed(kind: str, value: Any) -> Any:
    if value is None and kind.endswith("| None"):
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if kind.startswith("str"):
        return "" if value is None else str(value)
    number: float | None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is not None and not math.isfinite(number):
        number = None
    if kind.startswith("float"):
        return number
    if number is None:  # a whole number that is not one
        return None if kind.endswith("| None") else 0
    return int(number)


_FIELD_TYPES: dict[type, dict[str, str]] = {
    cls: {f.name: str(f.type) for f in fields(cls)} for cls in (CompactionRow, DecisionRow)
}


def _prefixed(row: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {name[len(prefix) :]: value for name, value in row.items() if name.startswith(prefix)}
