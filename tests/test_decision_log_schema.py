"""The decision log's schema: named migrations keyed by ``user_version``, and the files it refuses.

Regressions from issue 6: ``fast-jev log``/``stats`` printed a traceback on a newer schema or a
table-less database, and switched a foreign SQLite file to WAL. A refused file must be reported in
one line and left byte for byte as it was, by the hook (a writer) as much as by the commands.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from fast_jev_compaction.audit import CompactionRow, DecisionLog, DecisionLogError, DecisionRow, schema


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", *argv], capture_output=True, text=True, timeout=60
    )


def newer(path: Path) -> None:
    with DecisionLog(path) as log:
        log.record(CompactionRow(session_id="s", trigger="auto", outcome="skipped"))
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
        conn.execute("PRAGMA journal_mode = DELETE")  # so the file alone is the whole state


def table_less(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("DROP TABLE t")  # a real SQLite file, with pages, and no table left


def foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")


def ours_plus_foreign(path: Path) -> None:
    DecisionLog(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("CREATE TABLE notes (body TEXT)")


def wrong_columns(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE compactions (id INTEGER PRIMARY KEY, color TEXT)")
        conn.execute("CREATE TABLE decisions (id INTEGER PRIMARY KEY)")
        conn.execute("PRAGMA user_version = 1")


REFUSED: list[tuple[str, Callable[[Path], None], str, bool]] = [
    ("newer-schema", newer, "written by a newer fast-jev-compaction", True),
    ("table-less", table_less, "no decision-log tables", False),
    ("foreign", foreign, "not a fast-jev decision log (it holds notes)", True),
    ("ours-plus-foreign", ours_plus_foreign, "not a fast-jev decision log (it holds notes)", True),
    ("wrong-columns", wrong_columns, "compactions table is not a fast-jev decision log's", True),
]


@pytest.mark.parametrize(("make", "message", "writers_refuse"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_refused_file_gets_one_line_and_is_never_changed(
    tmp_path: Path, make: Callable[[Path], None], message: str, writers_refuse: bool
) -> None:
    db = tmp_path / "decisions.sqlite"
    make(db)
    before = digest(db)
    for command in ("log", "stats"):
        proc = cli(command, "--db", str(db))
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert proc.stderr.startswith(f"fast-jev {command}: {db} ") and message in proc.stderr
        assert proc.stderr.rstrip().endswith("left unchanged")
    with pytest.raises(DecisionLogError, match=re.escape(message)):
        DecisionLog(db, create=False)
    if writers_refuse:  # the hook opens with create=True: it must not adopt the file either
        with pytest.raises(DecisionLogError, match=re.escape(message)):
            DecisionLog(db)
    assert digest(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decisions.sqlite"]  # no -wal, no -shm
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_an_empty_file_or_a_table_less_one_is_a_new_log_for_the_writer(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    fresh = tmp_path / "fresh.sqlite"
    table_less(fresh)
    for db in (empty, fresh):
        with DecisionLog(db) as log:
            log.record(CompactionRow(session_id="s", trigger="auto", outcome="skipped"))
            assert len(log.compactions()) == 1


def test_migrations_are_named_ordered_and_counted_by_user_version() -> None:
    names = [m.__name__ for m in schema.MIGRATIONS]
    assert names == sorted(names)
    assert all(name.startswith(f"m{i:03d}_") for i, name in enumerate(names, start=1))
    assert schema.SCHEMA_VERSION == len(names) >= 2


def test_a_version_one_log_gains_the_new_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "decisions.sqlite"
    with sqlite3.connect(db) as conn:  # exactly what the previous release wrote
        schema.m001_compactions_and_decisions(conn)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO compactions (created_at, session_id, trigger, outcome, reason) "
            "VALUES ('2026-11-01T00:00:00.000Z', 'old', 'auto', 'fallback', 'Jev timed out')"
        )
        conn.execute(
            "INSERT INTO decisions (compaction_id, tool_use_id, action, reason) VALUES (1, 'toolu_old', 'drop_call', 'call_dropped')"
        )
    with DecisionLog(db) as log:
        (old,) = log.compactions()
        assert (old.session_id, old.fallback_reason) == ("old", None)
        assert log.decisions_for(1)[0].rule is None
        new_id = log.record(
            CompactionRow(session_id="new", trigger="manual", outcome="replaced"),
            [DecisionRow(tool_use_id="toolu_new", call_id="t1", tool="Read", action="drop",
                         reason="superseded-reread", rule="superseded-reread", archive_path="/data/archive/ab.txt")],
        )
        (stored,) = log.decisions_for(new_id)
        assert (stored.rule, stored.archive_path) == ("superseded-reread", "/data/archive/ab.txt")
        log.record(CompactionRow(session_id="new", trigger="auto", outcome="fallback", fallback_reason="deadline"))
        # Rows from before the category existed count as "unknown", never as a made-up category.
        assert dict(log.totals().fallback_reasons) == {"unknown": 1, "deadline": 1}
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        columns = {r[1] for r in conn.execute("PRAGMA table_info(compactions)")}
        assert {"fallback_reason", "spill_id"} <= columns


def test_a_version_two_log_gains_the_input_archive_column_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "decisions.sqlite"
    with sqlite3.connect(db) as conn:  # exactly what the release before migration 3 wrote
        schema.m001_compactions_and_decisions(conn)
        schema.m002_rule_archive_fallback_reason_spill(conn)
        conn.execute("PRAGMA user_version = 2")
        conn.execute("INSERT INTO compactions (session_id, trigger, outcome) VALUES ('old', 'auto', 'replaced')")
        conn.execute(
            "INSERT INTO decisions (compaction_id, tool_use_id, action, reason, archive_path) "
            "VALUES (1, 'toolu_old', 'truncate', 'input-archived', '/data/archive/out.txt')"
        )
    with DecisionLog(db) as log:
        (old,) = log.decisions_for(1)
        assert (old.tool_use_id, old.archive_path, old.input_archive_path) == ("toolu_old", "/data/archive/out.txt", None)
        new_id = log.record(
            CompactionRow(session_id="new", trigger="auto", outcome="replaced"),
            [DecisionRow(tool_use_id="toolu_new", call_id="t1", tool="Write", action="truncate", reason="input-archived",
                         archive_path="/data/archive/out.txt", input_archive_path="/data/archive/in.txt")],
        )
        (stored,) = log.decisions_for(new_id)
        assert (stored.archive_path, stored.input_archive_path) == ("/data/archive/out.txt", "/data/archive/in.txt")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION >= 3
        assert "input_archive_path" in {r[1] for r in conn.execute("PRAGMA table_info(decisions)")}
        assert conn.execute("SELECT COUNT(*) FROM compactions").fetchone()[0] == 2


def test_a_fallback_category_must_be_known_and_only_on_a_fallback(tmp_path: Path) -> None:
    with DecisionLog(tmp_path / "d.sqlite") as log:
        with pytest.raises(DecisionLogError, match="fallback_reason"):
            log.record(CompactionRow(session_id="s", trigger="auto", outcome="fallback", fallback_reason="bored"))
        with pytest.raises(DecisionLogError, match="fallback_reason"):
            log.record(CompactionRow(session_id="s", trigger="auto", outcome="skipped", fallback_reason="internal"))
        assert log.compactions() == []


def test_stats_counts_fallbacks_by_reason(tmp_path: Path) -> None:
    db = tmp_path / "decisions.sqlite"
    with DecisionLog(db) as log:
        for category in ("judge-error", "judge-error", "python-not-ready", "below-ratio"):
            log.record(CompactionRow(session_id="s", trigger="auto", outcome="fallback", fallback_reason=category))
        log.record(CompactionRow(session_id="s", trigger="auto", outcome="skipped", reason="nothing to compact"))
    text = cli("stats", "--db", str(db))
    assert text.returncode == 0
    assert "fallbacks by reason: judge-error 2, below-ratio 1, python-not-ready 1" in text.stdout
    doc = cli("stats", "--db", str(db), "--json")

    assert json.loads(doc.stdout)["lifetime"]["fallback_reasons"] == {
        "judge-error": 2, "below-ratio": 1, "python-not-ready": 1
    }
