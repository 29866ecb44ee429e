"""``fast-jev report``: the page renderer (pure) and the command over a real SQLite file.

The browser half (a real hook run rendered by headless Chromium) is in test_report_browser.py.
"""

from __future__ import annotations

import re
import sqlite3
import stat
from pathlib import Path

import pytest

from fast_jev_compaction import cli
from fast_jev_compaction.audit import CompactionRow, DecisionLog, DecisionRow
from fast_jev_compaction.audit.html import render_page
from fast_jev_compaction.audit.session import decision_kind, summarise, summary_text


def replaced(session: str = "s1", before: int = 10_000, freed: int = 6_000, **extra: object) -> CompactionRow:
    return CompactionRow(
        session_id=session, trigger="manual", outcome="replaced",
        chars_before=before, chars_after=before - freed, freed_chars=freed,
        messages_before=20, messages_after=18, **extra,  # type: ignore[arg-type]
    )


def fallback(reason: str, session: str = "s1") -> CompactionRow:
    return CompactionRow(session_id=session, trigger="auto", outcome="fallback", reason=reason,
                         chars_before=5_000, chars_after=5_000)


def decision(call_id: str, action: str, reason: str = "", **extra: object) -> DecisionRow:
    fields: dict[str, object] = {"keep_call": 0.8, "keep_result": 0.3, "result_chars": 1_000}
    fields.update(extra)
    return DecisionRow(
        tool_use_id=f"toolu_{call_id}", call_id=call_id, tool="Read", action=action, reason=reason,
        input_preview=f'{{"file_path":"src/{call_id}.py"}}', **fields,  # type: ignore[arg-type]
    )


def rows_of(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<tr class="call [^"]*" data-call="([^"]*)" data-decision="([^"]*)"', page)


# -- the renderer ------------------------------------------------------------------------------


def test_both_vocabularies_read_as_keep_truncate_drop() -> None:
    assert [decision_kind(a) for a in ("keep", "drop_result", "truncate", "drop_call", "drop")] == [
        "keep", "truncate", "truncate", "drop", "drop",
    ]
    row = replaced(id=1)
    old = [decision("t1", "keep", "kept"), decision("t2", "drop_result", "result_dropped"), decision("t3", "drop_call", "call_dropped")]
    new = [decision("t1", "keep", "judge"), decision("t2", "truncate", "judge"), decision("t3", "drop", "threshold")]
    expected = [("t1", "keep"), ("t2", "truncate"), ("t3", "drop")]
    for decisions in (old, new):
        page = render_page([summarise("s1", [(row, decisions)])], "log.sqlite")
        assert rows_of(page) == expected
        # The word is printed, not only the colour.
        assert '<span class="badge kind-truncate">truncate</span>' in page
        assert "judge: call 0.80 · result 0.30" in page


def test_a_rule_is_shown_instead_of_probabilities_and_a_rule_column_wins() -> None:
    pinned = decision("t1", "keep", "pinned", keep_call=1.0, keep_result=1.0)
    named = decision("t2", "drop", "superseded-reread")
    ruled = decision("t3", "truncate", "judge")
    ruled.rule = "protect-side-effect"  # type: ignore[attr-defined]  # the column a newer log has
    page = render_page([summarise("s1", [(replaced(id=1), [pinned, named, ruled])])], "log.sqlite")
    assert '<span class="rule">pinned</span>' in page
    assert '<span class="rule">superseded-reread</span>' in page
    assert '<span class="rule">protect-side-effect</span>' in page
    assert "judge: call" not in page


def test_archived_output_links_to_the_file_and_an_older_log_shows_none() -> None:
    cut = decision("t1", "truncate")
    cut.archive_path = "/data/archive/s 1/toolu_t1.txt"  # type: ignore[attr-defined]
    page = render_page([summarise("s1", [(replaced(id=1), [cut, decision("t2", "keep")])])], "log.sqlite")
    assert '<a href="file:///data/archive/s%201/toolu_t1.txt" title="/data/archive/s 1/toolu_t1.txt">toolu_t1.txt</a>' in page
    assert page.count("<a ") == 1


def test_a_call_whose_output_and_input_were_archived_links_to_both_files() -> None:
    both = decision("t1", "truncate", "input-archived", archive_path="/data/archive/out.txt", input_archive_path="/data/archive/in.txt")
    moved = decision("t2", "keep", "input-archived", input_archive_path="/data/archive/body.txt")
    page = render_page([summarise("s1", [(replaced(id=1), [both, moved])])], "log.sqlite")
    assert '<span class="muted">output</span> <a href="file:///data/archive/out.txt"' in page
    assert '<span class="muted">input</span> <a href="file:///data/archive/in.txt"' in page
    assert '<span class="muted">input</span> <a href="file:///data/archive/body.txt"' in page
    assert page.count("<a ") == 3


def test_everything_from_the_log_is_escaped() -> None:
    evil = "<script>alert(1)</script>"
    row = replaced(session='"><script>x()</script>', id=1, agent_id="<b>agent</b>")
    bad = DecisionRow(
        tool_use_id='toolu_"x', call_id='t1" onclick="x()', tool="<img src=x onerror=alert(1)>",
        action="<i>keep</i>", reason=evil, input_preview=f'{{"command":"echo {evil}"}}',
    )
    bad.archive_path = f"/tmp/{evil}.txt"  # type: ignore[attr-defined]
    page = render_page([summarise(row.session_id, [(row, [bad]), (fallback(evil, row.session_id), [])])], evil)
    assert "<script" not in page.lower()
    assert "<img" not in page and "<b>" not in page and "<i>" not in page
    assert 'onclick="' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_page_needs_no_network() -> None:
    rows = [(replaced(id=1), [decision("t1", "keep"), decision("t2", "drop")]), (fallback("judge timed out", "s1"), [])]
    page = render_page([summarise("s1", rows)], "/home/u/.claude/decisions.sqlite")
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", page, re.IGNORECASE)
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b|@import|url\(", page, re.IGNORECASE)
    assert "default-src 'none'" in page


def test_totals_fallback_reasons_and_honest_percentages() -> None:
    rows = [
        (replaced(id=1, before=100_000, freed=99_960), [decision("t1", "drop"), decision("t2", "drop_result")]),
        (fallback("judge timed out", "s1"), [decision("t1", "keep")]),
        (fallback("judge timed out", "s1"), []),
        (CompactionRow(session_id="s1", trigger="auto", outcome="skipped", reason="nothing to compact"), []),
    ]
    summary = summarise("s1", rows)
    assert summary.outcomes() == {"replaced": 1, "fallback": 2, "skipped": 1}
    assert summary.fallback_reasons() == [("fallback", "judge timed out", 2), ("skipped", "nothing to compact", 1)]
    # Calls of a fallback are not counted: nothing happened to them.
    assert summary.counts() == {"keep": 0, "truncate": 1, "drop": 1}
    page = render_page([summary], "log.sqlite")
    assert "99.9% kept out of context (99,960 of 100,000 chars freed)" in page
    shown = re.sub(r'<style>.*?</style>| style="[^"]*"', "", page, flags=re.DOTALL)
    assert "100.0%" not in shown
    assert "fallback ×2: judge timed out" in page
    assert "99.9% smaller" in page


def test_a_recorded_reason_category_groups_fallbacks() -> None:
    a, b = fallback("judge timed out after 30.0 s"), fallback("judge timed out after 12.5 s")
    for row in (a, b):
        row.fallback_reason = "deadline"
    assert summarise("s1", [(a, []), (b, [])]).fallback_reasons() == [("fallback", "deadline", 2)]


def test_empty_state_is_explicit() -> None:
    page = render_page([], "log.sqlite")
    assert 'id="empty-state"' in page and "No compactions recorded yet" in page
    assert "<table" not in page and "%" not in page.split("<body>")[1]
    assert summary_text([], "decision log x").startswith("No compactions recorded yet")
    # Only fallbacks: no percentage is drawn.
    only_fallbacks = summarise("s1", [(fallback("below minimum"), [])])
    assert "No compaction has freed context yet" in render_page([only_fallbacks], "log.sqlite")


def test_a_log_without_sizes_shows_a_dash() -> None:
    page = render_page([summarise("s1", [(replaced(id=1), [decision("t1", "keep", result_chars=None)])])], "x")
    assert '<td class="num">—</td>' in page


# -- the command -------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "decisions.sqlite"
    with DecisionLog(path) as log:
        log.record(replaced("session-aaa-1"), [decision("t1", "keep")])
        log.record(replaced("session-bbb-2"), [decision("t1", "drop"), decision("t2", "truncate")])
        log.record(fallback("judge timed out", "session-bbb-2"))
    return path


def test_last_is_the_newest_compactions_session(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> None:
    code, out, err = run(capsys, "report", "--db", str(db))
    assert (code, err) == (0, "")
    assert out.startswith("session session-bbb-2: 2 compaction(s) (1 replaced, 1 fallback, 0 skipped)\n")
    assert "  calls: 0 keep, 1 truncate, 1 drop\n" in out
    assert "  fallback ×1: judge timed out\n" in out

    page = tmp_path / "page.html"
    code, out, err = run(capsys, "report", "last", "--db", str(db), "--html", str(page))
    assert (code, err) == (0, "")
    assert out == f"wrote {page} (2 compaction(s) of session session-bbb-2)\n"
    assert rows_of(page.read_text(encoding="utf-8")) == [("t1", "drop"), ("t2", "truncate")]
    assert stat.S_IMODE(page.stat().st_mode) == 0o600


def test_the_text_summary_stays_short(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "long.sqlite"
    with DecisionLog(db) as log:
        for _ in range(25):
            log.record(replaced("s1"), [decision("t1", "keep")])
    code, out, _ = run(capsys, "report", "--db", str(db))
    assert code == 0
    assert "  … 15 earlier compaction(s); --html FILE shows them all\n" in out
    assert len(out.splitlines()) == 4 + 10
    assert out.splitlines()[-1].startswith("  #25 ")


def test_all_sessions_get_a_row_each_and_their_own_part(
    capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "report", "all", "--db", str(db))
    assert (code, out) == (0, (
        "session session-bbb-2: 2 compaction(s) (1 replaced, 1 fallback, 0 skipped); 60.0% kept out\n"
        "session session-aaa-1: 1 compaction(s) (1 replaced, 0 fallback, 0 skipped); 60.0% kept out\n"
    ))
    page = tmp_path / "all.html"
    code, out, _ = run(capsys, "report", "all", "--db", str(db), "--html", str(page))
    assert (code, out) == (0, f"wrote {page} (3 compaction(s) in 2 sessions)\n")
    html = page.read_text(encoding="utf-8")
    assert re.findall(r'<tr class="session-row" data-session="([^"]*)">', html) == ["session-bbb-2", "session-aaa-1"]
    assert '<a href="#session-1"><code>session-aaa-1</code></a>' in html and 'id="session-1"' in html
    assert "<td>fallback ×1: judge timed out</td>" in html
    assert rows_of(html) == [("t1", "drop"), ("t2", "truncate"), ("t1", "keep")]


def test_a_session_prefix_selects_and_bad_names_exit_2(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, _ = run(capsys, "report", "session-aaa", "--db", str(db), "--html", "-")
    assert code == 0 and rows_of(out) == [("t1", "keep")]
    code, out, err = run(capsys, "report", "session-", "--db", str(db))
    assert (code, out) == (2, "")
    assert err.startswith("fast-jev report: 'session-' matches 2 sessions; give more of the id (session-bbb-2, session-aaa-1)")
    code, _, err = run(capsys, "report", "nope", "--db", str(db))
    assert code == 2 and "no compaction recorded for session 'nope'; sessions, newest first: session-bbb-2, session-aaa-1" in err


def test_a_missing_log_is_the_empty_state(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    code, out, _ = run(capsys, "report", "--db", str(missing))
    assert code == 0 and out.startswith("No compactions recorded yet (decision log ")
    page = tmp_path / "empty.html"
    code, out, _ = run(capsys, "report", "--db", str(missing), "--html", str(page))
    assert (code, out) == (0, f"wrote {page} (no compactions recorded yet)\n")
    assert 'id="empty-state"' in page.read_text(encoding="utf-8")
    assert not missing.exists()  # reading never creates the log
    DecisionLog(missing).close()  # a log with no rows yet reads the same
    code, out, _ = run(capsys, "report", "last", "--db", str(missing))
    assert code == 0 and out.startswith("No compactions recorded yet (decision log ")
    code, _, err = run(capsys, "report", "s1", "--db", str(missing))
    assert code == 2 and "no compaction recorded for session 's1'" in err


def test_bad_files_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> None:
    code, _, err = run(capsys, "report", "--db", str(db), "--html", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "is a directory" in err
    code, _, err = run(capsys, "report", "--db", str(db), "--html", str(tmp_path / "no" / "page.html"))
    assert code == 2 and "does not exist" in err
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    code, _, err = run(capsys, "report", "--db", str(other))
    assert code == 2 and "not a fast-jev decision log" in err


def test_a_schema_1_log_reads_with_sizes_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "v1.sqlite"
    with DecisionLog(db) as log:
        log.record(replaced("s1"), [decision("t1", "drop_call", "call_dropped")])
    with sqlite3.connect(db) as conn:  # what a log written before result_chars looks like
        conn.execute("ALTER TABLE decisions DROP COLUMN result_chars")
        conn.execute("PRAGMA user_version = 1")
    code, out, err = run(capsys, "report", "--db", str(db), "--html", "-")
    assert (code, err) == (0, "")
    assert rows_of(out) == [("t1", "drop")]
    assert '<td class="num">—</td>' in out
    with DecisionLog(db, create=False) as log:  # upgraded in place, the old row kept
        assert log.decisions_for(1)[0].result_chars is None
