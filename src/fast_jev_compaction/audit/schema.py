"""The decision log's schema: ordered, named migrations keyed by ``PRAGMA user_version``.

``user_version`` is the number of migrations applied. Each migration runs in its own write
transaction together with its record (the ``user_version`` bump, which SQLite keeps in the same
transaction), so a crash leaves the file at a whole version. Columns are only ever added, each
with a constant default or NULL, so ``ALTER TABLE`` can add them.

Before anything is written, ``refusal`` looks at the file: a newer schema or tables this project
does not own are refused with one line, and the file is left exactly as it was.

Stdlib only: the hook imports this on its hot path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

OWN_TABLES = frozenset({"compactions", "decisions"})

# Frozen: exactly what migration 1 creates. A later column comes from a later migration, never
# from an edit here, so an old file and a new one reach the same schema.

_V1_INT_COLUMNS = (
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
_V1_COMPACTION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("created_at", "TEXT NOT NULL DEFAULT ''"),
    ("session_id", "TEXT NOT NULL DEFAULT ''"),
    ("agent_id", "TEXT"),
    ("trigger", "TEXT NOT NULL DEFAULT ''"),
    ("outcome", "TEXT NOT NULL DEFAULT ''"),
    ("reason", "TEXT NOT NULL DEFAULT ''"),
    ("judge", "TEXT NOT NULL DEFAULT ''"),
    *((name, "INTEGER NOT NULL DEFAULT 0") for name in _V1_INT_COLUMNS[:5]),
    ("stage", "TEXT NOT NULL DEFAULT ''"),
    *((name, "INTEGER NOT NULL DEFAULT 0") for name in _V1_INT_COLUMNS[5:]),
)
_V1_DECISION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("tool_use_id", "TEXT NOT NULL DEFAULT ''"),
    ("call_id", "TEXT NOT NULL DEFAULT ''"),
    ("tool", "TEXT NOT NULL DEFAULT ''"),
    ("input_preview", "TEXT NOT NULL DEFAULT ''"),
    ("keep_call", "REAL"),
    ("keep_result", "REAL"),
    ("action", "TEXT NOT NULL DEFAULT ''"),
    ("reason", "TEXT NOT NULL DEFAULT ''"),
    ("chars_freed", "INTEGER NOT NULL DEFAULT 0"),
)


# Single-column queries, unpacked as one value each: no row is read by position.


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(name) for (name,) in conn.execute("SELECT name FROM pragma_table_xinfo(?)", (table,))}


def _add_missing(conn: sqlite3.Connection, table: str, columns: tuple[tuple[str, str], ...]) -> None:
    have = _columns(conn, table)
    for name, decl in columns:
        if name not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")


def m001_compactions_and_decisions(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS compactions (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        + ", ".join(f"{name} {decl}" for name, decl in _V1_COMPACTION_COLUMNS)
        + ")"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS decisions (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "compaction_id INTEGER NOT NULL REFERENCES compactions(id) ON DELETE CASCADE, "
        + ", ".join(f"{name} {decl}" for name, decl in _V1_DECISION_COLUMNS)
        + ")"
    )
    # Builds before the first migration made tables with fewer columns at user_version 0.
    _add_missing(conn, "compactions", _V1_COMPACTION_COLUMNS)
    _add_missing(conn, "decisions", _V1_DECISION_COLUMNS)
    conn.execute("CREATE INDEX IF NOT EXISTS compactions_session ON compactions(session_id, id)")
    conn.execute("CREATE INDEX IF NOT EXISTS decisions_compaction ON decisions(compaction_id)")
    conn.execute("CREATE INDEX IF NOT EXISTS decisions_tool_use ON decisions(tool_use_id)")


def m002_rule_archive_fallback_reason_spill(conn: sqlite3.Connection) -> None:
    """The rule that settled a call, where its full output was archived, its output's size, the
    fallback's category, and the spill entry a row was replayed from (unique, so a replay is
    idempotent)."""
    _add_missing(conn, "decisions", (("rule", "TEXT"), ("archive_path", "TEXT"), ("result_chars", "INTEGER")))
    _add_missing(conn, "compactions", (("fallback_reason", "TEXT"), ("spill_id", "TEXT")))
    conn.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS compactions_spill ON compactions(spill_id) "
        "WHERE spill_id IS NOT NULL"
    )


def m003_input_archive(conn: sqlite3.Connection) -> None:
    """Where a call's moved input was archived: its own file, beside its cut output's."""
    _add_missing(conn, "decisions", (("input_archive_path", "TEXT"),))


Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: tuple[Migration, ...] = (
    m001_compactions_and_decisions,
    m002_rule_archive_fallback_reason_spill,
    m003_input_archive,
)
SCHEMA_VERSION = len(MIGRATIONS)


def user_version(conn: sqlite3.Connection) -> int:
    (version,) = conn.execute("SELECT user_version FROM pragma_user_version").fetchone()
    return int(version)


def refusal(conn: sqlite3.Connection, *, create: bool) -> str | None:
    """Why this file must not be used (one line), or None. Reads only.

    Refused: a schema newer than this build's; tables or views we do not own; at a recorded
    version, our tables missing or lacking their columns; and, unless ``create``, a file with no
    tables at all. A table-less file at version 0 is a new file when ``create`` is set.
    """
    version = user_version(conn)
    if version > SCHEMA_VERSION:
        return (
            f"was written by a newer fast-jev-compaction (schema {version}; this build reads up to "
            f"{SCHEMA_VERSION}); upgrade fast-jev-compaction to read it"
        )
    names = {
        str(name)
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
        )
    }
    foreign = sorted(names - OWN_TABLES)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        return f"is a SQLite database but not a fast-jev decision log (it holds {shown})"
    if not names:
        if version or not create:
            return "is a SQLite database with no decision-log tables"
        return None
    if "compactions" not in names:
        return "is a SQLite database but not a fast-jev decision log (no compactions table)"
    if version >= 1:
        wanted = {
            "compactions": {name for name, _ in _V1_COMPACTION_COLUMNS},
            "decisions": {name for name, _ in _V1_DECISION_COLUMNS},
        }
        for table, columns in wanted.items():
            if table not in names or not columns <= _columns(conn, table):
                return f"is a SQLite database whose {table} table is not a fast-jev decision log's"
    return None
