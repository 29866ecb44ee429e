"""The decision log store (audit/store.py) and its redaction (audit/redact.py).

ADR-0001 (context-mode) is the contract: several Claude Code windows write the same file, so the
store must be multi-writer (WAL + busy_timeout + bounded retry, never EXCLUSIVE) and must neither
hang nor silently drop a row when the lock cannot be had. The multi-process test is the anchor of
that contract: do not weaken it.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fast_jev_compaction.audit import (
    CompactionRow,
    DecisionLog,
    DecisionLogBusy,
    DecisionLogError,
    DecisionRow,
    default_db_path,
    preview,
)
from fast_jev_compaction.audit import store as store_module
from fast_jev_compaction.redaction import is_secret_key, redact_text

HERE = Path(__file__).resolve().parent


def compaction(**overrides: object) -> CompactionRow:
    fields: dict[str, object] = {
        "session_id": "s1",
        "trigger": "manual",
        "outcome": "replaced",
        "chars_before": 10_000,
        "chars_after": 4_000,
        "freed_chars": 6_000,
    }
    fields.update(overrides)
    return CompactionRow(**fields)  # type: ignore[arg-type]


def decision(tool_use_id: str = "toolu_1", **overrides: object) -> DecisionRow:
    fields: dict[str, object] = {
        "tool_use_id": tool_use_id,
        "call_id": "t1",
        "tool": "Read",
        "action": "drop_call",
        "reason": "call_dropped",
        "keep_call": 0.1,
        "keep_result": 0.1,
        "chars_freed": 1234,
        "input_preview": '{"file_path":"src/a.py"}',
    }
    fields.update(overrides)
    return DecisionRow(**fields)  # type: ignore[arg-type]


def count_rows(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


# -- round trip and queries -------------------------------------------------------------------


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    db = tmp_path / "nested" / "dir" / "decisions.sqlite"  # parents are created
    row = CompactionRow(
        session_id="sess",
        agent_id="agent-7",
        trigger="auto",
        outcome="replaced",
        reason="ok",
        judge="jev",
        messages_before=40,
        messages_after=22,
        chars_before=10_000,
        chars_after=4_000,
        freed_chars=6_000,
        stage="one_line",
        requests=3,
        retries=1,
        failed_batches=1,
        input_tokens=1_500,
        output_tokens=120,
        duration_ms=987,
    )
    decisions = [
        decision("toolu_a", call_id="t1"),
        DecisionRow(tool_use_id="toolu_b", call_id="t2", tool="Bash", action="keep", reason="pinned"),
    ]
    with DecisionLog(db) as log:
        cid = log.record(row, decisions)
        stored = log.compactions()
        stored_decisions = log.decisions_for(cid)

    assert len(stored) == 1
    got = stored[0]
    assert got.id == cid
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", got.created_at)
    for name in (
        "session_id agent_id trigger outcome reason judge messages_before messages_after "
        "chars_before chars_after freed_chars stage requests retries failed_batches "
        "input_tokens output_tokens duration_ms"
    ).split():
        assert getattr(got, name) == getattr(row, name), name
    assert [d.tool_use_id for d in stored_decisions] == ["toolu_a", "toolu_b"]
    first, second = stored_decisions
    assert first.compaction_id == cid
    assert (first.call_id, first.tool, first.action, first.reason) == ("t1", "Read", "drop_call", "call_dropped")
    assert (first.keep_call, first.keep_result, first.chars_freed) == (0.1, 0.1, 1234)
    assert first.input_preview == '{"file_path":"src/a.py"}'
    assert (second.keep_call, second.keep_result) == (None, None)
    assert second.reason == "pinned"


def test_queries_filter_order_and_why_newest_first(tmp_path: Path) -> None:
    with DecisionLog(tmp_path / "d.sqlite") as log:
        first = log.record(compaction(session_id="s1"), [decision("toolu_x", action="keep", reason="kept")])
        second = log.record(compaction(session_id="s2"), [decision("toolu_y")])
        third = log.record(compaction(session_id="s1"), [decision("toolu_x", action="drop_call")])

        assert [c.id for c in log.compactions()] == [first, second, third]
        assert [c.id for c in log.compactions(session_id="s1")] == [first, third]
        assert [c.id for c in log.compactions(last=2)] == [second, third]
        assert [c.id for c in log.compactions(session_id="s1", last=1)] == [third]
        assert log.compactions(session_id="nobody") == []

        why = log.why("toolu_x")
        assert [(c.id, d.action) for c, d in why] == [(third, "drop_call"), (first, "keep")]
        assert log.why("toolu_never") == []
        assert log.decisions_for(999) == []


def test_totals_count_only_replaced_context(tmp_path: Path) -> None:
    with DecisionLog(tmp_path / "d.sqlite") as log:
        log.record(
            compaction(requests=2, input_tokens=100, output_tokens=10),
            [
                decision("a", action="keep", reason="kept"),
                decision("b", action="keep", reason="pinned"),
                decision("c", action="drop_result", reason="result_dropped"),
                decision("d", action="drop_call"),
                decision("e", action="drop_call"),
            ],
        )
        # A fallback had a big context and judge work, but freed nothing: its size must not count
        # and its decisions did not happen.
        log.record(
            compaction(outcome="fallback", reason="jev timeout", chars_before=50_000, chars_after=50_000,
                       freed_chars=0, requests=1, retries=2, judge="jev"),
            [decision("f", action="drop_call")],
        )
        log.record(compaction(session_id="s2", outcome="skipped", reason="no tool calls", chars_before=0,
                              chars_after=0, freed_chars=0), [])
        everything = log.totals()
        s1 = log.totals("s1")

    assert (everything.sessions, everything.compactions) == (2, 3)
    assert (everything.replaced, everything.fallback, everything.skipped) == (1, 1, 1)
    assert (everything.chars_before, everything.freed_chars) == (10_000, 6_000)
    assert (everything.requests, everything.retries, everything.input_tokens) == (3, 2, 100)
    assert (everything.kept, everything.pinned, everything.truncated, everything.dropped) == (1, 1, 1, 2)
    assert set(everything.reasons) == {("fallback", "jev timeout", 1), ("skipped", "no tool calls", 1)}
    assert dict(everything.judges) == {"local": 2, "jev": 1}
    assert (s1.sessions, s1.compactions, s1.skipped) == (1, 2, 0)


def _decision_count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM decisions").fetchone()
    return int(count)


def test_prune_drops_old_compactions_with_their_decisions(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    with DecisionLog(path) as log:
        log.record(compaction(session_id="old", created_at="2020-01-01T00:00:00.000Z"), [decision("a")])
        log.record(compaction(session_id="new"), [decision("b"), decision("c")])
        assert log.prune(keep_days=90) == 1
        assert [row.session_id for row in log.compactions()] == ["new"]
        assert log.decisions_for(1) == []
    assert _decision_count(path) == 2


def test_prune_keeps_only_the_newest_compactions(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    with DecisionLog(path) as log:
        for n in range(5):
            log.record(compaction(session_id=f"s{n}"), [decision(f"t{n}")])
        assert log.prune(keep_compactions=2) == 3
        assert sorted(row.session_id for row in log.compactions()) == ["s3", "s4"]
    assert _decision_count(path) == 2


def test_writes_prune_the_log_now_and_then(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "PRUNE_EVERY", 4)
    monkeypatch.setattr(store_module, "KEEP_COMPACTIONS", 3)
    with DecisionLog(tmp_path / "d.sqlite") as log:
        for n in range(3):
            log.record(compaction(session_id=f"s{n}"))
        assert len(log.compactions()) == 3
        log.record(compaction(session_id="s3"))  # the 4th write prunes down to the newest 3
        assert sorted(row.session_id for row in log.compactions()) == ["s1", "s2", "s3"]


class iter_twice:  # noqa: N801 - reads as the iterable it is
    """Rows that can be walked again, as a record's retry does, but are not a list."""

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def __iter__(self) -> Any:
        return iter(self.rows)


def test_rows_that_would_lie_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    with DecisionLog(db) as log:
        with pytest.raises(DecisionLogError, match="outcome"):
            log.record(compaction(outcome="maybe"), [])
        with pytest.raises(DecisionLogError, match="cannot exceed"):
            log.record(compaction(freed_chars=10_001), [])
        with pytest.raises(DecisionLogError, match="frees nothing"):
            log.record(compaction(outcome="fallback"), [])  # 6,000 freed by a fallback
        with pytest.raises(DecisionLogError, match="non-negative"):
            log.record(compaction(requests=-1), [])
        with pytest.raises(DecisionLogError, match="probability"):
            log.record(compaction(), [decision(keep_call=1.5)])
        with pytest.raises(DecisionLogError, match="probability"):
            # Rows are checked as they are written: the good ones before go with the transaction.
            log.record(compaction(), iter_twice([decision(), decision(keep_result=-0.5)]))
    assert count_rows(db, "compactions") == 0
    assert count_rows(db, "decisions") == 0


def test_a_failing_decision_insert_rolls_back_the_compaction(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    sleeps: list[float] = []
    with DecisionLog(db, sleep=sleeps.append) as log:
        log.record(compaction(), [decision()])
        with sqlite3.connect(db) as other:
            other.execute("DROP TABLE decisions")
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            log.record(compaction(), [decision()])
    # One transaction: the compaction row went away with the failed decisions.
    assert count_rows(db, "compactions") == 1
    # Not a busy error, so not retried.
    assert sleeps == []


def test_stored_preview_is_redacted_and_bounded_even_if_the_caller_forgot(tmp_path: Path) -> None:
    raw = "password=hunter2 " + "x" * 500
    with DecisionLog(tmp_path / "d.sqlite") as log:
        cid = log.record(compaction(), [decision(input_preview=raw)])
        stored = log.decisions_for(cid)[0].input_preview
    assert "hunter2" not in stored
    assert len(stored) <= 160 and stored.endswith("…")


# -- schema and migration ---------------------------------------------------------------------


def test_migration_is_idempotent_and_reopening_keeps_rows(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    with DecisionLog(db) as a, DecisionLog(db) as b:  # open twice, at the same time
        a.record(compaction(), [decision()])
        assert len(b.compactions()) == 1
    with DecisionLog(db) as again:
        assert len(again.compactions()) == 1
        again.record(compaction(), [])
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store_module.SCHEMA_VERSION
        tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'"))
        assert {"compactions", "decisions"} <= set(tables)
        assert int(conn.execute("SELECT COUNT(*) FROM compactions").fetchone()[0]) == 2


def test_an_old_database_missing_columns_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as conn:  # what an earlier build might have left: version 0, fewer columns
        conn.execute(
            "CREATE TABLE compactions (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT, "
            "session_id TEXT, trigger TEXT, outcome TEXT, chars_before INTEGER, chars_after INTEGER)"
        )
        conn.execute(
            "INSERT INTO compactions (created_at, session_id, trigger, outcome, chars_before, chars_after) "
            "VALUES ('2024-01-01T00:00:00.000Z', 'old', 'manual', 'fallback', 500, 500)"
        )
    with DecisionLog(db) as log:
        (old,) = log.compactions()
        assert (old.session_id, old.outcome, old.chars_before, old.freed_chars, old.judge) == (
            "old", "fallback", 500, 0, ""
        )
        new_id = log.record(compaction(), [decision()])
        assert log.decisions_for(new_id)[0].tool_use_id == "toolu_1"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store_module.SCHEMA_VERSION


def test_readers_never_create_or_adopt_foreign_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(FileNotFoundError):
        DecisionLog(missing, create=False)
    assert not missing.exists()

    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(DecisionLogError, match="not a fast-jev decision log"):
        DecisionLog(foreign, create=False)
    with sqlite3.connect(foreign) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["notes"]

    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(DecisionLogError, match="not a usable decision log"):
        DecisionLog(garbage)


# -- concurrency contract (ADR-0001) ----------------------------------------------------------


def test_connection_is_wal_with_busy_timeout_and_normal_sync(tmp_path: Path) -> None:
    with DecisionLog(tmp_path / "d.sqlite") as log:
        conn = log._conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2000
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA locking_mode").fetchone()[0] == "normal"
    # The worst case of one write stays far below the ~60 s hook timeout.
    assert store_module.DEFAULT_BUDGET_S <= 5
    assert store_module.DEFAULT_BUSY_TIMEOUT_MS / 1000 <= store_module.DEFAULT_BUDGET_S


def test_source_never_asks_for_exclusive_locking() -> None:
    source = Path(store_module.__file__).read_text(encoding="utf-8")
    assert not re.search(r"locking_mode\s*=\s*['\"]?EXCLUSIVE", source, re.I)
    assert "time.sleep" in source  # waiting sleeps, it does not spin


def test_two_logs_share_the_file_while_both_stay_open(tmp_path: Path) -> None:
    # Under EXCLUSIVE locking the first writer would keep the lock until close and B would fail.
    db = tmp_path / "d.sqlite"
    with DecisionLog(db) as a, DecisionLog(db, retry_delays=()) as b:
        a.record(compaction(session_id="a"), [])
        b.record(compaction(session_id="b"), [])
        a.record(compaction(session_id="a"), [])
        assert [c.session_id for c in a.compactions()] == ["a", "b", "a"]
        assert [c.session_id for c in b.compactions()] == ["a", "b", "a"]


def test_readers_are_not_blocked_by_a_writer_holding_its_transaction(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    with DecisionLog(db) as log:
        log.record(compaction(), [])
    writer = sqlite3.connect(db, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO compactions (session_id, outcome) VALUES ('pending', 'skipped')")
        with DecisionLog(db, retry_delays=()) as reader:  # no retries: must succeed first time
            assert [c.session_id for c in reader.compactions()] == ["s1"]  # committed rows only
            assert reader.totals().compactions == 1
        writer.execute("COMMIT")
    finally:
        writer.close()


def _child(*args: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(
        [sys.executable, str(HERE / "decision_log_writer.py"), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _start_together(procs: list[subprocess.Popen[str]], sync: Path, ready: int) -> list[tuple[str, str]]:
    try:
        give_up = time.monotonic() + 60
        while len(list(sync.glob("ready-*"))) < ready:
            if time.monotonic() > give_up or any(p.poll() is not None for p in procs):
                break
            time.sleep(0.01)
        (sync / "go").touch()
        return [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_concurrent_processes_lose_no_row(tmp_path: Path) -> None:
    # Load-bearing (ADR-0001): real processes, a fresh file they all create at once, one
    # open+write per record like the hook. A swallowed error would show up as a missing row.
    db = tmp_path / "shared" / "decisions.sqlite"
    writers, per_writer = 4, 100
    procs = [_child("write", db, w, per_writer, 2, tmp_path, store_module.DEFAULT_BUDGET_S) for w in range(writers)]
    results = _start_together(procs, tmp_path, writers)
    for p, (out, err) in zip(procs, results):
        assert (p.returncode, err) == (0, "")
        assert out.startswith("OK ") and sum(map(int, out.split()[1:])) == per_writer

    log = store_module.open_log(db)
    assert log is not None
    with log:
        rows = log.compactions()
        assert len(rows) == writers * per_writer
        for w in range(writers):
            assert len(log.compactions(session_id=f"writer-{w}")) == per_writer
        assert len({c.id for c in rows}) == len(rows)
        for w in range(writers):
            for i in (0, per_writer - 1):
                assert len(log.why(f"toolu_{w}_{i}_1")) == 1
    assert count_rows(db, "decisions") == 2 * writers * per_writer


def test_sixteen_writers_and_a_lock_held_past_the_budget_lose_no_row(tmp_path: Path) -> None:
    # 16 processes x 1,000 decision rows (50 compactions of 20), batched as the hook batches them,
    # while another process holds the write lock three times the writers' budget: what cannot be
    # written in time is spilled, and the next opening replays it. Not one row may be missing.
    db = tmp_path / "decisions.sqlite"
    writers, compactions_each, decisions_each, budget_s = 16, 50, 20, 0.5
    holder = _child("hold", db, 3 * budget_s, tmp_path)
    give_up = time.monotonic() + 60
    while not (tmp_path / "held").exists():  # every writer starts while the lock is held
        assert holder.poll() is None and time.monotonic() < give_up, holder.communicate()
        time.sleep(0.01)
    procs = [_child("write", db, w, compactions_each, decisions_each, tmp_path, budget_s) for w in range(writers)]
    results = _start_together([*procs, holder], tmp_path, writers)
    spilled = 0
    for p, (out, err) in zip(procs, results):
        assert (p.returncode, err) == (0, "")
        written, spills = map(int, out.split()[1:])
        assert written + spills == compactions_each
        spilled += spills
    assert holder.returncode == 0 and results[-1] == ("OK held\n", "")
    assert spilled > 0  # the lock really outlasted the budget

    log = store_module.open_log(db)
    assert log is not None
    with log:
        for w in range(writers):
            assert len(log.compactions(session_id=f"writer-{w}")) == compactions_each
        assert len(log.compactions(session_id="holder")) == 1
    assert not list(tmp_path.glob("decisions.sqlite.spill-*"))
    assert count_rows(db, "compactions") == writers * compactions_each + 1
    assert count_rows(db, "decisions") == writers * compactions_each * decisions_each
    with sqlite3.connect(db) as conn:
        distinct = conn.execute("SELECT COUNT(DISTINCT tool_use_id) FROM decisions").fetchone()[0]
    assert distinct == writers * compactions_each * decisions_each  # none lost, none replayed twice


def test_a_lock_held_past_the_budget_raises_busy_not_hang_nor_drop(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    sleeps: list[float] = []
    log = DecisionLog(db, busy_timeout_ms=20, sleep=sleeps.append)
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # another process's write lock, never released in time
        with pytest.raises(DecisionLogBusy, match="locked by another writer") as info:
            log.record(compaction(), [decision()])
        assert info.value.attempts == 4
        assert sleeps == [0.05, 0.2, 0.8]  # bounded: the default delays, then give up
        blocker.execute("ROLLBACK")
        # The configured busy wait is restored after the shrunk retries.
        assert log._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 20
        assert count_rows(db, "compactions") == 0  # the failed write left nothing half-done
        log.record(compaction(), [decision()])  # and the log still works afterwards
        assert count_rows(db, "compactions") == 1
    finally:
        blocker.close()
        log.close()


def test_a_lock_released_during_the_backoff_is_retried_and_written(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    blocker = sqlite3.connect(db, isolation_level=None)
    sleeps: list[float] = []

    def sleep_then_release(delay: float) -> None:
        sleeps.append(delay)
        if blocker.in_transaction:
            blocker.execute("COMMIT")

    try:
        with DecisionLog(db, busy_timeout_ms=20, sleep=sleep_then_release) as log:
            blocker.execute("BEGIN IMMEDIATE")
            cid = log.record(compaction(), [decision()])
            assert sleeps == [0.05]
            assert [c.id for c in log.compactions()] == [cid]
    finally:
        blocker.close()


# -- default location -------------------------------------------------------------------------


def test_default_db_path_resolution_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert default_db_path({"FAST_JEV_DB": str(tmp_path / "x.db"), "CLAUDE_PLUGIN_DATA": "/nope"}) == tmp_path / "x.db"
    assert default_db_path({"CLAUDE_PLUGIN_DATA": str(tmp_path / "pd"), "HOME": str(home)}) == (
        tmp_path / "pd" / "decisions.sqlite"
    )
    inline = home / ".claude" / "plugins" / "data" / "fast-jev-compaction-inline" / "decisions.sqlite"
    assert default_db_path({"HOME": str(home)}) == inline
    assert not inline.exists()

    data = home / ".claude" / "plugins" / "data"
    older = data / "fast-jev-compaction-market-a" / "decisions.sqlite"
    newer = data / "fast-jev-compaction-market-b" / "decisions.sqlite"
    for path, mtime in ((older, 1_000_000), (newer, 2_000_000)):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
        os.utime(path, (mtime, mtime))
    (data / "other-plugin").mkdir()
    (data / "other-plugin" / "decisions.sqlite").write_bytes(b"")
    assert default_db_path({"HOME": str(home)}) == newer

    config = tmp_path / "config"
    assert default_db_path({"HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)}) == (
        config / "plugins" / "data" / "fast-jev-compaction-inline" / "decisions.sqlite"
    )


# -- redaction --------------------------------------------------------------------------------

AWS = "AKIAIOSFODNN7EXAMPLE"
SK = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv"
RANDOM = "q8Zr4TbX2mWn7KpL9vYc3HsJ"


@pytest.mark.parametrize(
    ("tool_input", "secret"),
    [
        ({"password": "hunter2"}, "hunter2"),
        ({"auth": {"user": "bob", "pass": "pw"}}, "bob"),
        ({"headers": {"Authorization": "Basic Ym9iOnB3"}}, "Ym9iOnB3"),
        ({"apiKey": "plainvalue"}, "plainvalue"),
        ({"env": {"GITHUB_TOKEN": "abc"}}, "abc"),
        ({"client_secret": 12345}, "12345"),
        ({"db_credentials": "user/pw"}, "user/pw"),
        ({"command": f"aws s3 ls --profile x # {AWS}"}, AWS),
        ({"command": f"curl -H 'x-api-key: {SK}' https://api"}, SK[5:]),
        ({"command": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig' x"}, "eyJhbGciOiJIUzI1NiJ9"),
        ({"content": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"}, "MIIEowIBAAKCAQEA"),
        ({"url": "postgres://admin:s3cr3tpw@db.internal:5432/app"}, "s3cr3tpw"),
        ({"command": f"deploy --release=fast SIGNING={RANDOM}"}, RANDOM),
        ({"command": "mysql --password hunter22 -u root"}, "hunter22"),
        ({"command": "export DB_PASSWORD='correct horse'"}, "correct horse"),
        ({"body": '{"token": "tok_live_123"}'}, "tok_live_123"),
    ],
)
def test_preview_masks_secrets(tool_input: dict[str, object], secret: str) -> None:
    out = preview(tool_input)
    assert secret not in out
    assert "***" in out or "[private key redacted]" in out


def test_preview_keeps_harmless_input_readable() -> None:
    tool_input = {
        "file_path": "src/a.py",
        "max_tokens": 100,
        "command": "git log --oneline  -n 5\n\t&& pytest --mode=fast",
        "passthrough": True,
    }
    assert preview(tool_input) == (
        '{"file_path":"src/a.py","max_tokens":100,'
        '"command":"git log --oneline -n 5 && pytest --mode=fast","passthrough":true}'
    )
    assert not is_secret_key("tokens_used") and is_secret_key("accessToken") and is_secret_key("x-api-key")


def test_preview_masks_before_truncating() -> None:
    # The secret straddles the cut: masking after the cut would leak its first half.
    tool_input = {"command": "x" * 130 + f" {AWS} tail"}
    out = preview(tool_input, limit=160)
    assert len(out) <= 160
    assert "AKIAIOSF" not in out and "AKIA" not in out.replace("***", "")
    long = preview({"content": "word " * 200}, limit=40)
    assert len(long) == 40 and long.endswith("…")
    with pytest.raises(ValueError):
        preview({}, limit=0)


def test_redact_text_is_idempotent() -> None:
    text = f"curl https://u:pw@h -H 'Authorization: Bearer abcdefghijk' --token=zz {AWS}"
    once = redact_text(text)
    assert redact_text(once) == once
    assert "pw@" not in once and "abcdefghijk" not in once and AWS not in once


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=40))
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    extra=st.dictionaries(st.text(max_size=12), json_value, max_size=5),
    secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=12, max_size=30),
    limit=st.integers(min_value=1, max_value=300),
)
def test_preview_is_bounded_and_never_shows_a_secret_named_value(
    extra: dict[str, object], secret: str, limit: int
) -> None:
    tool_input = {**extra, "password": secret}
    out = preview(tool_input, limit=limit)
    assert len(out) <= limit
    assert secret not in preview(tool_input, limit=10_000) or secret in str(extra)


def test_prune_keeps_the_newest_compactions_whose_decisions_fit_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    with DecisionLog(path) as log:
        for n in range(5):  # 4 decisions each: a long session's compactions, each of many calls
            log.record(compaction(session_id=f"s{n}"), [decision(f"t{n}.{k}") for k in range(4)])
        assert log.prune(keep_decisions=10) == 3  # the newest two hold 8; a third would make 12
        assert sorted(row.session_id for row in log.compactions()) == ["s3", "s4"]
    assert _decision_count(path) == 8


def test_prune_gives_the_freed_pages_back_to_the_file_system(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    with DecisionLog(path) as log:
        for n in range(40):
            log.record(compaction(session_id=f"s{n}"), [decision(f"t{n}.{k}") for k in range(200)])
        full = _pages(path)
        assert log.prune(keep_compactions=2) == 38
    assert _pages(path) < full / 4


def _pages(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])
