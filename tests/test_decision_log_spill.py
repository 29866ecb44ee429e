"""Spill entries: rows that could not be written in time, replayed by the next write, once.

The many-process version (16 writers and a lock held past the budget) is in test_decision_log.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from fast_jev_compaction.audit import CompactionRow, DecisionLog, DecisionRow, open_log, record_or_spill, spill


def row(session: str = "s1", **extra: object) -> CompactionRow:
    fields: dict[str, object] = {"session_id": session, "trigger": "auto", "outcome": "replaced",
                                 "chars_before": 100, "chars_after": 40, "freed_chars": 60}
    fields.update(extra)
    return CompactionRow(**fields)  # type: ignore[arg-type]


def calls(n: int, prefix: str = "toolu") -> list[DecisionRow]:
    return [DecisionRow(tool_use_id=f"{prefix}_{i}", call_id=f"t{i}", tool="Read", action="keep") for i in range(n)]


def entries(db: Path) -> list[Path]:
    return sorted(db.parent.glob(f"{db.name}.spill-*"))


def test_a_locked_log_spills_privately_and_the_next_write_replays_it_once(tmp_path: Path) -> None:
    db = tmp_path / "decisions.sqlite"
    DecisionLog(db).close()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        spilled = record_or_spill(db, row("spilled", created_at="2026-01-02T03:04:05.678Z"), calls(3),
                                  budget_s=0.1, busy_timeout_ms=20)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert isinstance(spilled, Path) and entries(db) == [spilled]
    assert spilled.stat().st_mode & 0o777 == 0o600
    assert json.loads(spilled.read_text())["compaction"]["session_id"] == "spilled"

    with DecisionLog(db) as log:
        new_id = log.record(row("next"), calls(1, "toolu_next"))
        got = {c.session_id: c for c in log.compactions()}
        assert set(got) == {"spilled", "next"}
        assert got["spilled"].created_at == "2026-01-02T03:04:05.678Z"  # when it happened, not when replayed
        assert [d.tool_use_id for d in log.decisions_for(got["spilled"].id or 0)] == ["toolu_0", "toolu_1", "toolu_2"]
        assert len(log.decisions_for(new_id)) == 1
    assert entries(db) == []


def test_a_replay_interrupted_after_its_commit_never_duplicates(tmp_path: Path) -> None:
    db = tmp_path / "decisions.sqlite"
    path = spill.write(db, {"session_id": "once", "trigger": "auto", "outcome": "skipped"}, [])
    kept = path.read_bytes()
    with DecisionLog(db) as log:
        assert log.replay_spill() == 1
    path.write_bytes(kept)  # as if the process died between the commit and the delete
    with DecisionLog(db) as log:
        log.replay_spill()
        assert [c.session_id for c in log.compactions()] == ["once"]
    assert entries(db) == []


def test_entries_that_can_never_be_replayed_are_set_aside_not_retried_forever(tmp_path: Path) -> None:
    db = tmp_path / "decisions.sqlite"
    lying = spill.write(db, {"session_id": "x", "trigger": "auto", "outcome": "maybe"}, [])
    half = db.parent / f"{db.name}.spill-1-half.json"
    half.write_text('{"compaction": {"sess')  # the mod may still be writing this one
    old_half = db.parent / f"{db.name}.spill-0-old.json"
    old_half.write_text('{"compaction": {"sess')
    an_hour_ago = time.time() - 3600
    os.utime(old_half, (an_hour_ago, an_hour_ago))
    with DecisionLog(db) as log:
        log.record(row(), [])
        assert len(log.compactions()) == 1
    names = sorted(p.name for p in entries(db))
    assert names == sorted([half.name, lying.name + ".bad", old_half.name + ".bad"])


def test_the_mods_entry_shows_in_stats_before_any_log_exists(tmp_path: Path) -> None:
    # What hooks/mod.mjs writes when the Python environment is not ready: no database yet.
    db = tmp_path / "decisions.sqlite"
    entry = {
        "compaction": {
            "created_at": "2026-12-01T05:19:36.123Z", "session_id": "sess-1", "agent_id": None,
            "trigger": "manual", "outcome": "fallback", "reason": "Python environment not ready",
            "fallback_reason": "python-not-ready", "judge": "none", "messages_before": 4,
            "messages_after": 4, "duration_ms": 12,
        },
        "decisions": [],
    }
    (tmp_path / f"{db.name}.spill-1764566376123-k3j9x0ab.json").write_text(json.dumps(entry))
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "stats", "--db", str(db), "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lifetime = json.loads(proc.stdout)["lifetime"]
    assert (lifetime["fallback"], lifetime["fallback_reasons"]) == (1, {"python-not-ready": 1})
    assert entries(db) == []
    log = open_log(db)
    assert log is not None
    with log:
        (stored,) = log.compactions()
    assert (stored.session_id, stored.duration_ms, stored.reason) == ("sess-1", 12, "Python environment not ready")


def test_nothing_recorded_and_nothing_spilled_is_the_empty_state(tmp_path: Path) -> None:
    db = tmp_path / "decisions.sqlite"
    assert open_log(db) is None
    assert not db.exists()


def test_an_entry_sqlite_cannot_store_is_set_aside_and_the_new_row_still_written(tmp_path: Path) -> None:
    db = tmp_path / "decisions.sqlite"
    broken = spill.write(db, {"session_id": "lone \ud800 surrogate", "trigger": "auto", "outcome": "skipped"}, [])
    good = spill.write(db, {"session_id": "fine", "trigger": "auto", "outcome": "skipped"}, [])
    with DecisionLog(db) as log:
        log.record(row("new"), [])
        assert sorted(c.session_id for c in log.compactions()) == ["fine", "new"]
    assert entries(db) == [broken.with_name(broken.name + ".bad")]
    assert not good.exists()


def test_pending_lists_this_logs_entries_oldest_first_whatever_the_folder_is_called(tmp_path: Path) -> None:
    folder = tmp_path / "odd [name]*?"  # characters a glob pattern would read as wildcards
    folder.mkdir()
    db = folder / "decisions.sqlite"
    assert spill.pending(tmp_path / "missing" / "decisions.sqlite") == []
    for name in ("decisions.sqlite.spill-200-1-a.json", "decisions.sqlite.spill-1000-1-b.json",
                 "decisions.sqlite.spill-30-1-c.json", "decisions.sqlite.spill-40-1-d.json.bad",
                 "other.sqlite.spill-10-1-e.json", "decisions.sqlite"):
        (folder / name).write_text("{}", encoding="utf-8")
    assert [p.name for p in spill.pending(db)] == [
        "decisions.sqlite.spill-30-1-c.json", "decisions.sqlite.spill-200-1-a.json", "decisions.sqlite.spill-1000-1-b.json",
    ]


def test_spill_pending_and_load_never_read_a_fifo_or_a_link_to_an_endless_file(tmp_path: Path) -> None:
    db = tmp_path / "decisions.sqlite"
    os.mkfifo(tmp_path / f"{db.name}.spill-1-fifo.json")  # opened for reading, it would wait forever
    (tmp_path / f"{db.name}.spill-2-zero.json").symlink_to("/dev/zero")  # read whole, it never ends
    real = spill.write(db, {"session_id": "s", "trigger": "auto", "outcome": "fallback", "reason": "r",
                            "fallback_reason": "internal"}, [])
    assert spill.pending(db) == [real]
    assert spill.load(tmp_path / f"{db.name}.spill-1-fifo.json") is None
    assert spill.load(tmp_path / f"{db.name}.spill-2-zero.json") is None
    # The guard only ends a hang: `fast-jev stats` reads the log at once, the real entry replayed.
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "stats", "--db", str(db), "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["lifetime"]["fallback"] == 1
