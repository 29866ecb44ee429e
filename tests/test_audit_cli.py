"""``fast-jev log`` / ``fast-jev stats`` through the real CLI, on a real SQLite file.

The stats fixtures are context-mode ADR-0004's four: an empty state draws no percentage, a mixed
case counts only what was in the context, "everything freed" is an honest 100.0%, and 99.888%
shows 99.9% (never rounded up to 100).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fast_jev_compaction import cli
from fast_jev_compaction.audit import CompactionRow, DecisionLog, DecisionRow
from fast_jev_compaction.audit.report import EMPTY_STATE, format_pct, kept_out_tenths


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def replaced(session: str = "s1", before: int = 10_000, freed: int = 6_000, **extra: object) -> CompactionRow:
    return CompactionRow(
        session_id=session,
        trigger="manual",
        outcome="replaced",
        chars_before=before,
        chars_after=before - freed,
        freed_chars=freed,
        **extra,  # type: ignore[arg-type]
    )


def not_replaced(outcome: str, reason: str, session: str = "s1", before: int = 50_000) -> CompactionRow:
    return CompactionRow(
        session_id=session, trigger="auto", outcome=outcome, reason=reason,
        chars_before=before, chars_after=before,
    )


def make_db(path: Path, *rows: tuple[CompactionRow, list[DecisionRow]]) -> Path:
    with DecisionLog(path) as log:
        for row, decisions in rows:
            log.record(row, decisions)
    return path


# -- stats: the ADR-0004 fixtures -------------------------------------------------------------


def test_fixture_1_empty_state_with_only_fallbacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = make_db(
        tmp_path / "d.sqlite",
        (not_replaced("fallback", "jev timeout"), []),
        (not_replaced("skipped", "no tool calls", before=0), []),
    )
    code, out, _ = run(capsys, "stats", "--db", str(db))
    assert code == 0
    assert EMPTY_STATE in out
    assert "%" not in out  # no percentage is drawn from nothing
    assert "fallback ×1: jev timeout" in out and "skipped ×1: no tool calls" in out


def test_fixture_1_empty_state_with_a_missing_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "never" / "decisions.sqlite"
    code, out, err = run(capsys, "stats", "--db", str(db))
    assert (code, err) == (0, "")
    assert EMPTY_STATE in out and "%" not in out
    assert not db.exists() and not db.parent.exists()  # reading never creates the log

    code, out, _ = run(capsys, "stats", "--db", str(db), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["lifetime"]["kept_out_pct"] is None and doc["lifetime"]["compactions"] == 0


def test_fixture_2_mixed_counts_only_what_was_in_the_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fallback's 50,000 chars never left the context: counting them would show ~10%.
    db = make_db(tmp_path / "d.sqlite", (replaced(), []), (not_replaced("fallback", "jev 500"), []))
    code, out, _ = run(capsys, "stats", "--db", str(db))
    assert code == 0
    assert "60.0% kept out of context (6,000 of 10,000 chars freed)" in out
    assert EMPTY_STATE not in out


def test_fixture_3_everything_freed_is_an_honest_100(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = make_db(tmp_path / "d.sqlite", (replaced(before=10_000, freed=10_000), []))
    code, out, _ = run(capsys, "stats", "--db", str(db))
    assert code == 0
    assert "100.0% kept out of context (10,000 of 10,000 chars freed)" in out


def test_fixture_4_one_decimal_never_over_claims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = make_db(tmp_path / "d.sqlite", (replaced(before=9_374_436, freed=9_363_976), []))
    code, out, _ = run(capsys, "stats", "--db", str(db))
    assert code == 0
    assert "99.9% kept out of context" in out
    assert "100" not in out


def test_stats_through_a_real_process(tmp_path: Path) -> None:
    db = make_db(tmp_path / "d.sqlite", (replaced(), []))
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "stats", "--db", str(db)],
        capture_output=True, text=True, timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "60.0% kept out of context" in proc.stdout
    assert "archive: no saved outputs yet" in proc.stdout


def test_stats_counts_the_archive_beside_the_log(tmp_path: Path) -> None:
    from fast_jev_compaction.decide.archive import write_archive

    db = make_db(tmp_path / "d.sqlite", (replaced(), []))
    write_archive({str(tmp_path / "archive" / "a.txt"): "x" * 2048, str(tmp_path / "archive" / "b.txt"): "y"})
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "stats", "--db", str(db), "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert json.loads(proc.stdout)["archive"] == {"path": str(tmp_path / "archive"), "files": 2, "bytes": 2049}


@given(before=st.integers(min_value=1, max_value=10**12), data=st.data())
def test_kept_out_percentage_rounds_honestly(before: int, data: st.DataObject) -> None:
    freed = data.draw(st.integers(min_value=0, max_value=before))
    tenths = kept_out_tenths(freed, before)
    assert tenths is not None
    exact = freed * 100 / before
    if freed == before:
        assert format_pct(tenths) == "100.0%"
    else:
        assert tenths <= 999  # short of everything is never "100.0%"
        tolerance = 0.1 if exact >= 99.95 else 0.05 + 1e-9
        assert abs(tenths / 10 - exact) <= tolerance
    assert kept_out_tenths(0, 0) is None


@pytest.mark.parametrize(
    ("freed", "before", "shown"),
    [(99_950, 100_000, "99.9%"), (99_999, 100_000, "99.9%"), (9_363_976, 9_374_436, "99.9%"),
     (600, 1000, "60.0%"), (6_005, 10_000, "60.1%"), (6_004, 10_000, "60.0%"), (0, 10, "0.0%")],
)
def test_percentage_examples(freed: int, before: int, shown: str) -> None:
    assert format_pct(kept_out_tenths(freed, before) or 0) == shown


def test_session_stats_and_lifetime_are_separate_sections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db(
        tmp_path / "d.sqlite",
        (replaced("s1", before=10_000, freed=6_000, requests=2, input_tokens=1_200, output_tokens=300),
         [DecisionRow(tool_use_id="a", call_id="t1", tool="Read", action="drop_call"),
          DecisionRow(tool_use_id="b", call_id="t2", tool="Read", action="drop_result"),
          DecisionRow(tool_use_id="c", call_id="t3", tool="Read", action="keep", reason="kept")]),
        (replaced("s2", before=10_000, freed=1_000), []),
    )
    code, out, _ = run(capsys, "stats", "--db", str(db), "--session", "s1")
    assert code == 0
    session_part, lifetime_part = out.split("Lifetime, all sessions")
    assert "Session s1" in session_part
    assert "60.0% kept out of context (6,000 of 10,000 chars freed)" in session_part
    assert "1 kept, 1 truncated, 1 dropped" in session_part
    assert "tokens: 1,200 in, 300 out" in session_part
    assert "2 requests" in session_part
    assert "(2 sessions)" in lifetime_part
    assert "35.0% kept out of context (7,000 of 20,000 chars freed)" in lifetime_part

    code, out, _ = run(capsys, "stats", "--db", str(db), "--session", "nobody")
    session_part, lifetime_part = out.split("Lifetime, all sessions")
    assert EMPTY_STATE in session_part and "%" not in session_part
    assert "35.0%" in lifetime_part

    code, out, _ = run(capsys, "stats", "--db", str(db), "--session", "s1", "--json")
    doc = json.loads(out)
    assert (doc["session_id"], doc["session"]["kept_out_pct"], doc["lifetime"]["kept_out_pct"]) == ("s1", 60.0, 35.0)
    assert doc["session"]["freed_chars"] == 6_000 and doc["lifetime"]["chars_before"] == 20_000


def test_stats_reads_the_default_location_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_db(tmp_path / "plugin-data" / "decisions.sqlite", (replaced(), []))
    monkeypatch.delenv("FAST_JEV_DB", raising=False)
    monkeypatch.setenv("CLAUDE_PLUGIN_DATA", str(db.parent))
    code, out, _ = run(capsys, "stats")
    assert code == 0 and "60.0%" in out


# -- log -------------------------------------------------------------------------------------


@pytest.fixture
def history(tmp_path: Path) -> Path:
    return make_db(
        tmp_path / "d.sqlite",
        (replaced("s1", stage="full", requests=1, duration_ms=1_234),
         [DecisionRow(tool_use_id="toolu_read", call_id="t3", tool="Read", action="drop_call",
                      reason="call_dropped", keep_call=0.1, keep_result=0.1, chars_freed=1_234,
                      input_preview='{"file_path":"src/a.py"}'),
          DecisionRow(tool_use_id="toolu_pin", call_id="t4", tool="Bash", action="keep", reason="pinned")]),
        (not_replaced("fallback", "jev timeout", session="s2"), []),
        (replaced("s1", before=8_000, freed=2_000),
         [DecisionRow(tool_use_id="toolu_read", call_id="t1", tool="Read", action="keep", reason="kept",
                      keep_call=0.9, keep_result=0.8)]),
    )


def test_log_shows_each_compaction_and_its_decisions(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "log", "--db", str(history))
    assert code == 0
    blocks = out.strip().split("\n\n")
    assert len(blocks) == 3
    assert [re.match(r"#(\d+)", b).group(1) for b in blocks] == ["1", "2", "3"]  # type: ignore[union-attr]
    first = blocks[0]
    assert "session s1" in first and "trigger manual" in first and "replaced" in first
    assert "chars 10,000 → 4,000 (freed 6,000)" in first and "stage full" in first and "1,234 ms" in first
    table = [line.split() for line in first.splitlines()[4:]]
    assert table[0] == ["call", "tool", "target", "decision", "rule", "/", "probabilities", "freed"]
    assert table[1] == ["t3", "Read", "src/a.py", "drop", "call", "0.10", "result", "0.10", "1,234"]
    assert table[2][:5] == ["t4", "Bash", "-", "keep", "pinned"]
    assert "fallback: jev timeout" in blocks[1]


def test_log_filters_by_session_and_last(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "log", "--db", str(history), "--session", "s2")
    assert re.findall(r"^#(\d+)", out, re.M) == ["2"]
    _, out, _ = run(capsys, "log", "--db", str(history), "--last", "2")
    assert re.findall(r"^#(\d+)", out, re.M) == ["2", "3"]
    _, out, _ = run(capsys, "log", "--db", str(history), "--session", "s1", "--last", "1")
    assert re.findall(r"^#(\d+)", out, re.M) == ["3"]
    code, out, _ = run(capsys, "log", "--db", str(history), "--session", "nobody")
    assert code == 0 and "No compactions recorded yet for session nobody" in out


def test_log_json_is_a_valid_document(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "log", "--db", str(history), "--json")
    assert code == 0
    doc = json.loads(out)
    assert [c["id"] for c in doc["compactions"]] == [1, 2, 3]
    first = doc["compactions"][0]
    assert (first["session_id"], first["freed_chars"], first["outcome"]) == ("s1", 6_000, "replaced")
    assert [d["call_id"] for d in first["decisions"]] == ["t3", "t4"]
    assert first["decisions"][0]["keep_call"] == 0.1 and first["decisions"][1]["keep_call"] is None
    assert doc["compactions"][1]["decisions"] == []


def test_log_why_lists_every_decision_about_a_call_newest_first(
    history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "log", "--db", str(history), "--why", "toolu_read")
    assert code == 0
    assert out.startswith("toolu_read: 2 decisions, newest first")
    assert re.findall(r"#(\d+)", out) == ["3", "1"]
    assert out.index("t1 Read keep") < out.index("t3 Read drop")
    assert "saved in" not in out  # nothing of it was archived

    _, out, _ = run(capsys, "log", "--db", str(history), "--why", "toolu_read", "--json")
    doc = json.loads(out)
    assert [(r["compaction"]["id"], r["decision"]["decision"]) for r in doc["decisions"]] == [(3, "keep"), (1, "drop")]

    code, out, _ = run(capsys, "log", "--db", str(history), "--why", "toolu_unknown")
    assert code == 0 and "No decision recorded about tool call toolu_unknown" in out


def test_log_why_names_the_files_a_call_s_output_and_input_went_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = make_db(
        tmp_path / "d.sqlite",
        (replaced("s1"),
         [DecisionRow(tool_use_id="toolu_write", call_id="t5", tool="Write", action="truncate",
                      reason="input-archived", chars_freed=9_000, archive_path="/data/archive/w-out.txt",
                      input_archive_path="/data/archive/w-in.txt"),
          DecisionRow(tool_use_id="toolu_read", call_id="t6", tool="Read", action="truncate", reason="budget",
                      chars_freed=4_000, archive_path="/data/archive/r-out.txt")]),
    )
    code, out, _ = run(capsys, "log", "--db", str(db), "--why", "toolu_write")
    assert code == 0
    assert out.index("t5 Write truncate") < out.index("output saved in /data/archive/w-out.txt") < out.index(
        "input saved in /data/archive/w-in.txt"
    )
    _, out, _ = run(capsys, "log", "--db", str(db), "--why", "toolu_read")
    assert "output saved in /data/archive/r-out.txt" in out and "input saved in" not in out


def test_log_names_the_folder_a_compaction_s_cuts_were_saved_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = make_db(
        tmp_path / "d.sqlite",
        (replaced("s1"),
         [DecisionRow(tool_use_id="toolu_write", call_id="t5", tool="Write", action="keep",
                      reason="input-archived", chars_freed=9_000, input_archive_path="/data/archive/w-in.txt"),
          DecisionRow(tool_use_id="toolu_read", call_id="t6", tool="Read", action="truncate", reason="budget",
                      chars_freed=4_000, archive_path="/data/archive/r-out.txt")]),
        (replaced("s1"), [DecisionRow(tool_use_id="toolu_ls", call_id="t1", tool="Bash", action="keep")]),
    )
    code, out, _ = run(capsys, "log", "--db", str(db))
    first, second = out.split("\n\n")
    assert code == 0
    assert first.rstrip().endswith("saved whole in /data/archive; `fast-jev log --why CALL` names a call's file")
    assert first.count("saved whole in") == 1
    assert "saved whole" not in second  # nothing cut: no folder to name


def test_log_why_takes_a_unique_prefix_or_the_newest_short_id(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for ref in ("toolu_r", "t1", "t3"):  # t1 and t3 both name toolu_read, in #3 and #1
        code, out, _ = run(capsys, "log", "--db", str(history), "--why", ref)
        assert code == 0 and out.startswith("toolu_read: 2 decisions, newest first"), ref
    code, out, _ = run(capsys, "log", "--db", str(history), "--why", "t4")
    assert code == 0 and out.startswith("toolu_pin: 1 decision")
    code, out, err = run(capsys, "log", "--db", str(history), "--why", "toolu_")
    assert (code, out) == (2, "")
    assert err == "fast-jev log: 2 tool calls start with 'toolu_' (toolu_pin, toolu_read); give more of the id\n"


def test_session_takes_a_unique_prefix(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = make_db(history, (replaced("s2-other"), []))
    _, out, _ = run(capsys, "log", "--db", str(db), "--session", "s1")
    assert re.findall(r"^#(\d+)", out, re.M) == ["1", "3"]
    code, _, err = run(capsys, "stats", "--db", str(db), "--session", "s2")
    assert code == 0  # exact match wins over the prefix
    code, _, err = run(capsys, "log", "--db", str(db), "--session", "s")
    assert code == 2 and err == "fast-jev log: 3 sessions start with 's'; give more of the id\n"


def test_log_of_a_missing_db_is_the_empty_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.sqlite"
    code, out, err = run(capsys, "log", "--db", str(missing))
    assert (code, err) == (0, "") and "No compactions recorded yet" in out
    code, out, _ = run(capsys, "log", "--db", str(missing), "--json")
    assert code == 0 and json.loads(out) == {"compactions": []}
    assert not missing.exists()


@pytest.mark.parametrize("command", ["log", "stats"])
def test_bad_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, out, err = run(capsys, command, "--db", str(tmp_path))  # a directory
    assert code == 2 and out == "" and "is a directory" in err

    foreign = tmp_path / "other.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    code, _, err = run(capsys, command, "--db", str(foreign))
    assert code == 2 and "not a fast-jev decision log" in err


@pytest.mark.parametrize(("value", "why"), [("-3", "expected 0 (everything) or more, got -3"), ("many", "expected a whole number, got 'many'")])
def test_bad_count_is_a_one_line_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, why: str) -> None:
    assert cli.main(["log", "--db", str(tmp_path / "d.sqlite"), "-n", value]) == 2
    assert capsys.readouterr().err == f"fast-jev log: argument -n/--last: {why} (see fast-jev log --help)\n"


# -- terminal control bytes ---------------------------------------------------------------------

# ESC (a CSI that clears the screen, an OSC that retitles the window), BEL, the 8-bit CSI, DEL.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_log_report_and_stats_escape_terminal_control_bytes_from_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = "s\x1b[2Jclear"
    db = make_db(
        tmp_path / "d.sqlite",
        (CompactionRow(session_id=session, agent_id="agent\x9b31m", trigger="manual\x07", outcome="replaced",
                       chars_before=100, chars_after=40, freed_chars=60),
         [DecisionRow(tool_use_id="toolu_1\x1b[1m", call_id="t1", tool="Bash\x1b]0;owned\x07", action="keep",
                      reason="pinned\x7f")]),
    )
    shown = ""
    for argv in (["log"], ["log", "--json"], ["log", "--why", "t1"], ["report"], ["report", "last", "--html", "-"],
                 ["stats", "--session", "s"], ["stats", "--session", "s", "--json"]):
        code, out, err = run(capsys, *argv, "--db", str(db))
        assert (code, err) == (0, ""), argv
        shown += out
    assert CONTROL.findall(shown) == []
    assert "s\\u001b[2Jclear" in shown and "agent\\u009b31m" in shown and "Bash\\u001b]0;owned\\u0007" in shown


@pytest.mark.parametrize("argv", [["log"], ["report"], ["stats"], ["log", "--json"]])
def test_cli_main_prints_what_a_latin_1_terminal_cannot_show_as_escapes(tmp_path: Path, argv: list[str]) -> None:
    db = make_db(
        tmp_path / "d.sqlite",
        (replaced("sessión-→-1"), [DecisionRow(tool_use_id="toolu_1", call_id="t1", tool="Read✓", action="keep", reason="pinned")]),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", *argv, "--db", str(db)],
        capture_output=True, timeout=60, env={**os.environ, "PYTHONIOENCODING": "latin-1"},
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
    # What Latin-1 has is written in it; what it lacks ("→", the stats' rules) as an escape.
    assert b"sessi\xf3n-\\u2192-1" in proc.stdout or b"\\u2500" in proc.stdout or b"sessi\\u00f3n" in proc.stdout


# -- a tampered log -----------------------------------------------------------------------------


def test_rows_read_back_with_their_fields_types_whatever_a_tampered_log_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db(
        tmp_path / "d.sqlite",
        (replaced("s1"), [DecisionRow(tool_use_id="toolu_1", call_id="t1", tool="Read", action="keep", reason="kept",
                                      keep_call=0.9, keep_result=0.8, result_chars=10)]),
    )
    with sqlite3.connect(db) as conn:  # SQLite keeps whatever type it is given
        conn.execute("UPDATE compactions SET chars_before = 'many', freed_chars = x'00ff', session_id = 42, "
                     "trigger = x'41', duration_ms = 1.5, agent_id = 7, created_at = 3.25")
        conn.execute("UPDATE decisions SET keep_call = 'high', keep_result = x'01', chars_freed = 'lots', "
                     "tool = 9, result_chars = 'ten', input_preview = 5, call_id = 1.0")
    for argv in (["log"], ["log", "--json"], ["log", "--why", "toolu_1"], ["report"], ["report", "all", "--html", "-"],
                 ["stats"], ["stats", "--json"]):
        code, out, err = run(capsys, *argv, "--db", str(db))
        assert (code, err) == (0, ""), (argv, err)
        assert out
