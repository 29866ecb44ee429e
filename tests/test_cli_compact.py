"""``fast-jev compact`` on every corpus file: exit codes and the output's invariants."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fast_jev_compaction.cli import main
from fast_jev_compaction.conversation.messages import parse_messages
from fast_jev_compaction.conversation.transcript import TranscriptError, read_messages
from fast_jev_compaction.decide.archive import archive_name
from fast_jev_compaction.decide.markers import carries_mark, is_turn_index_line, saved_path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
PRESERVE = 6
DATA_FILES = sorted(p for p in CORPUS.rglob("*") if p.suffix in {".jsonl", ".json"} and p.name != "MANIFEST.json") if CORPUS.is_dir() else []


DROP_MARK = "[fast-jev-compaction: the "


def _prose(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.startswith(DROP_MARK))


def _ids(messages):
    uses = [u.tool_use_id for m in messages for u in m.toolUses]
    results = [r.tool_use_id for m in messages for r in m.toolResults or ()]
    return uses, results


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_compact_every_corpus_file(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    code = main(["compact", str(path), "--out", str(out), "--judge", "local", "--preserve-recent", str(PRESERVE)])
    captured = capsys.readouterr()
    try:
        before = read_messages(path)
    except TranscriptError as exc:
        # Not a transcript: a clear error and a non-zero exit, nothing written.
        assert code == 2
        assert str(exc) in captured.err
        assert not out.exists()
        return
    assert code == 0, captured.err
    assert "reduction;" in captured.out
    after = parse_messages(json.loads(out.read_text(encoding="utf-8")))

    uses_before, results_before = _ids(before)
    uses_after, results_after = _ids(after)
    # No orphans are created: every result kept has its call, every call that had a result keeps it.
    assert set(results_after) - set(results_before) == set()
    assert {r for r in results_after if r in uses_before} <= set(uses_after)
    completed_before = set(uses_before) & set(results_before)
    assert {u for u in uses_after if u in completed_before} <= set(results_after)
    # Pending calls and orphan results stay as they were.
    assert set(uses_before) - set(results_before) <= set(uses_after)
    assert set(results_before) - set(uses_before) <= set(results_after)

    # Text is byte-identical and in order: set the marker lines of dropped calls aside, and the
    # output's texts are a subsequence of the input's.
    texts_before = iter([(m.role, m.text) for m in before])
    for pair in ((m.role, _prose(m.text)) for m in after):
        assert any(pair == candidate for candidate in texts_before), f"text changed or reordered: {pair[1][:80]!r}"

    # Every call that left has a marker where it was, and every marker's path holds the original.
    originals = {r.tool_use_id: r.text for m in before for r in m.toolResults or ()}
    gone = completed_before - set(uses_after)
    markers = [line for m in after for line in m.text.split("\n") if line.startswith(DROP_MARK)]
    assert len(markers) == len(gone)
    cut = [r.text for m in after for r in m.toolResults or () if carries_mark(r.text) and r.text != originals.get(r.tool_use_id)]
    # A dropped call whose output was empty has nothing to save: its marker says so and names no file.
    empty = [line for line in markers if " returned no " in line]
    assert len(empty) == sum(1 for i in gone if not originals[i])
    saved = {saved_path(text) for text in [line for line in markers if line not in empty] + cut}
    assert None not in saved
    # Read as bytes: read_text() would turn a saved "\r" into "\n" and call an exact copy different.
    assert {Path(p).read_bytes().decode("utf-8") for p in saved} <= set(originals.values()) | {
        o.encode("utf-8", "replace").decode("utf-8") for o in originals.values()
    }
    assert len(saved) == len({archive_name(originals[i]) for i in gone if originals[i]} | {Path(p).name for p in saved})

    if before:
        assert after[0] == before[0]
        tail = min(PRESERVE, len(before) - 1)
        if tail:
            assert after[-tail:] == before[-tail:]


def test_bad_input_exits_non_zero_with_a_clear_message(tmp_path: Path) -> None:
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"type":"user","message":{"role":"user","content":"hi"}}\n{not json\n', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "broken.jsonl:2" in proc.stderr
    assert proc.stdout == ""


def test_missing_file_and_bad_threshold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    example = REPO / "examples" / "session.jsonl"
    assert main(["compact", str(example), "--keep-threshold", "1.5"]) == 2
    assert capsys.readouterr().err == "fast-jev compact: argument --keep-threshold: expected a number in [0, 1], got 1.5 (see fast-jev compact --help)\n"


def test_example_session_is_compacted_with_the_embedded_judge(tmp_path: Path) -> None:
    out = tmp_path / "compacted.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(REPO / "examples" / "session.jsonl"),
         "--out", str(out), "--format", "jsonl", "--decisions"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    summary = proc.stdout.strip()
    assert summary.endswith(("request(s)", "no judge requests")) or "judge read" in summary
    ratio = float(summary.split("%", 1)[0])
    assert ratio > 0
    lines = out.read_text(encoding="utf-8").splitlines()
    before = read_messages(REPO / "examples" / "session.jsonl")
    assert 0 < len(lines) <= len(before)
    header, *rows = proc.stderr.splitlines()
    assert header.split() == ["call", "tool", "target", "size", "decision", "rule", "/", "probabilities", "freed"]
    assert len(rows) == 12 and rows[0].split()[:3] == ["t1", "Bash", "ls"]
    # aligned: every row's decision column starts where the header's does
    column = header.index("decision")
    assert all(row[column:].split()[0] in ("keep", "truncate", "drop") for row in rows)


@pytest.mark.parametrize("count", [0, 1, 3])
def test_the_json_output_written_piece_by_piece_is_json_dumps_own(count: int) -> None:
    from types import SimpleNamespace

    from fast_jev_compaction.commands.compact import _payload
    from fast_jev_compaction.conversation.messages import SessionMessage, ToolResult

    messages = [
        SessionMessage(role="user", text="déjà vu\nline 2", handle="h"),
        SessionMessage(role="assistant", text="", extra={"extraBlocks": [{"type": "thinking", "thinking": "…"}]}),
        SessionMessage(role="user", toolResults=(ToolResult(tool_use_id="t", text="a\n\"b\""),)),
    ][:count]
    result = SimpleNamespace(messages=messages)
    wire = [m.to_wire() for m in messages]
    assert "".join(_payload(result, "json", "")) == json.dumps(wire, ensure_ascii=False, indent=1) + "\n"
    assert "".join(_payload(result, "jsonl", "")) == "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in wire)


LONG_SESSION = CORPUS / "entire-checkpoints" / "theogbrand__napoli-matcha" / "22a878b9-baa2-44fe-a285-6f1830185218.jsonl"


def _strings(value: object) -> list[str]:
    """Every string in a call's input, nested ones included (MultiEdit's edits)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.mark.skipif(not LONG_SESSION.is_file(), reason="the shared corpus is not here")
def test_a_window_brings_a_long_session_under_its_target_and_every_cut_reads_back_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Twice the window: cutting outputs is not enough, old Write/Edit bodies and heredocs go to
    the archive too, and the context ends under 40 % of the window."""
    out = tmp_path / "out.json"
    code = main(["compact", str(LONG_SESSION), "--out", str(out), "--judge", "local", "--window", "32000",
                 "--target-percent", "40", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    stats = json.loads(captured.out)["stats"]
    assert stats["chars_before"] / 3.5 > 32000 * 1.5
    assert stats["chars_after"] / 3.5 < 32000 * 0.40
    assert stats["need_chars"] > 0 and stats["inputs_archived"] > 0

    before = read_messages(LONG_SESSION)
    after = parse_messages(json.loads(out.read_text(encoding="utf-8")))
    originals = {r.text for m in before for r in m.toolResults or ()}
    originals |= {s for m in before for u in m.toolUses for s in _strings(u.input)}
    marked = [r.text for m in after for r in m.toolResults or ()] + [line for m in after for line in m.text.split("\n")]
    marked += [s for m in after for u in m.toolUses for s in _strings(u.input)]
    saved = {path for text in marked if carries_mark(text) and (path := saved_path(text)) is not None}
    moved = {s for m in after for u in m.toolUses for s in _strings(u.input) if s.startswith("[fast-jev-compaction moved ")}
    assert moved and {saved_path(s) for s in moved} <= saved
    turns = {saved_path(line) for line in marked if is_turn_index_line(line)}
    for path in saved - turns:
        assert Path(path).read_bytes().decode("utf-8") in originals, path
    # An index line's file holds the turn, or the older part of the turn in flight, as the pass
    # left it: its digests' and markers' files hold originals in turn.
    for path in turns:
        text = Path(str(path)).read_bytes().decode("utf-8")
        assert text.startswith("## the user's prompt\n"), path
        for line in text.split("\n"):
            named = saved_path(line) if carries_mark(line) else None
            if named is not None:
                assert Path(named).read_bytes().decode("utf-8") in originals, named


def test_compact_out_log_and_archive_are_private_under_a_permissive_umask(tmp_path: Path) -> None:
    out = tmp_path / "compacted.json"
    log = tmp_path / "logs" / "nested" / "decisions.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "compact", str(REPO / "examples" / "session.jsonl"),
         "--out", str(out), "--log", str(log)],
        capture_output=True, text=True, preexec_fn=lambda: os.umask(0),
    )
    assert proc.returncode == 0, proc.stderr
    archive = tmp_path / "compacted.json.archive"
    made = [out, log, *log.parent.glob("decisions.sqlite-*"), *archive.iterdir()]
    assert len(made) > 2 and {path.name: mode(path) for path in made} == {path.name: 0o600 for path in made}
    folders = [archive, log.parent, log.parent.parent]
    assert {str(path): mode(path) for path in folders} == {str(path): 0o700 for path in folders}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_log_names_the_file_an_archived_input_went_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 21: `fast-jev log` shows the file an input-archived call's input went to (its largest
    moved input field's), beside the file a cut output went to."""
    out, log = tmp_path / "out.json", tmp_path / "decisions.sqlite"
    code = main(["compact", str(LONG_SESSION), "--out", str(out), "--judge", "local", "--window", "32000",
                 "--target-percent", "40", "--log", str(log)])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["log", "--db", str(log), "--json", "-n", "0"]) == 0
    decisions = [d for c in json.loads(capsys.readouterr().out)["compactions"] for d in c["decisions"]]
    moved = [d for d in decisions if d["reason"] == "input-archived"]
    assert moved
    inputs = {u.tool_use_id: _strings(u.input) for m in read_messages(LONG_SESSION) for u in m.toolUses}
    for d in moved:
        saved = Path(d["input_archive_path"]).read_bytes().decode("utf-8")
        assert saved == max(inputs[d["tool_use_id"]], key=len), d
        assert (d["archive_path"] is None) == (d["decision"] == "keep"), d
