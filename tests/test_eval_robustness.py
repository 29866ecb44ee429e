"""The evaluation's variance report: where sessions come from, folds, the bootstrap, the signs of cut outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from eval_sessions import Transcript, reuse_session, write_session
from fast_jev_compaction.evaluation.corpus import load_sessions, session_group, session_origin, session_split
from fast_jev_compaction.evaluation.outcome import Outcome
from fast_jev_compaction.evaluation.quality import PIPELINE, evaluate
from fast_jev_compaction.evaluation.robustness import (
    FOLDS,
    CutOutput,
    bootstrap,
    folds,
    gone_share,
    removed_share,
    session_fold,
    signal_rows,
)
from fast_jev_compaction.judge.model import load_model


def _outcome(reused: int, gone: int, before: int, after: int) -> Outcome:
    return Outcome(reused=reused, gone=gone, unpinned_chars_before=before, unpinned_chars_after=after)


def test_a_session_comes_from_the_first_folder_under_the_root_and_its_project_folder(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    main = root / "collection" / "projects" / "-home-me-app" / "abc.jsonl"
    agent = root / "collection" / "projects" / "-home-me-app" / "abc" / "subagents" / "agent-1.jsonl"
    assert session_origin(session_group(main), root) == ("collection", "collection/projects/-home-me-app")
    # a subagent belongs to its session, so to the session's project
    assert session_origin(session_group(agent), root) == ("collection", "collection/projects/-home-me-app")
    # a file given directly: its own folder is both
    assert session_origin(session_group(root / "loose.jsonl"), root) == ("corpus", "corpus")


def test_loaded_sessions_carry_their_source_and_project(tmp_path: Path) -> None:
    for source in ("one", "two"):
        (tmp_path / source / "proj").mkdir(parents=True)
        write_session(tmp_path / source / "proj" / f"{source}.jsonl", reuse_session(True, name=source))
    sessions, skipped = load_sessions([tmp_path])
    assert not skipped
    assert sorted((s.source, s.project) for s in sessions) == [("one", "one/proj"), ("two", "two/proj")]


def test_every_scheme_splits_the_sessions_once_and_adds_up_to_the_whole() -> None:
    by_session = {f"/c/s{n}": _outcome(n % 4, n % 2, 1000 + n, 400) for n in range(30)}
    origins = {g: (f"src{n % 3}", f"src{n % 3}/p{n % 5}") for n, g in enumerate(by_session)}
    parts = folds(by_session, origins)
    assert {p.scheme for p in parts} == {"source", "project", "fold"}
    whole = Outcome()
    for outcome in by_session.values():
        whole.add(outcome)
    for scheme in ("source", "project", "fold"):
        mine = [p for p in parts if p.scheme == scheme]
        assert sum(p.sessions for p in mine) == len(by_session)
        for field in ("reused", "gone", "unpinned_chars_before", "unpinned_chars_after"):
            assert sum(getattr(p.outcome, field) for p in mine) == getattr(whole, field)
    assert len([p for p in parts if p.scheme == "source"]) == 3
    assert {p.name for p in parts if p.scheme == "fold"} <= {f"{k} of {FOLDS}" for k in range(1, FOLDS + 1)}


def test_the_fold_is_by_session_id_and_spreads_sessions() -> None:
    ids = [f"session-{n}" for n in range(100)]
    assert len({session_fold(i) for i in ids}) == FOLDS
    assert [session_fold(i) for i in ids] == [session_fold(f"session-{n}") for n in range(100)]


def _named_alike(tmp_path: Path) -> None:
    """Two users' sessions in files of the same name, a subagent of the first in a file of its own
    beside it (the older layout), and a list of messages, which carries no id."""
    for user, session in (("u1", "id-one"), ("u2", "id-two")):
        t = Transcript(session).prompt("Read it")
        t.tool(f"{session}-r", "Read", "line " * 50, file_path="/src/a.py")
        t.said("Done.").write(tmp_path / "src" / user / "session.jsonl")
    agent = Transcript("id-one").prompt("Look")
    agent.tool("agent-r", "Read", "other " * 50, file_path="/src/b.py")
    agent.said("Found.").write(tmp_path / "src" / "u1" / "agent-7.jsonl")
    (tmp_path / "src" / "u3").mkdir()
    write_session(tmp_path / "src" / "u3" / "plain.jsonl", reuse_session(True, name="p"))


def test_a_session_is_known_by_the_id_its_records_carry(tmp_path: Path) -> None:
    _named_alike(tmp_path)
    sessions, skipped = load_sessions([tmp_path])
    assert not skipped
    by_file = {str(s.path.relative_to(tmp_path)): s.session_id for s in sessions}
    assert by_file == {"src/u1/session.jsonl": "id-one", "src/u2/session.jsonl": "id-two",
                       "src/u1/agent-7.jsonl": "id-one", "src/u3/plain.jsonl": "plain"}


def test_the_figures_per_session_and_the_folds_count_a_session_once_with_its_subagent(tmp_path: Path) -> None:
    _named_alike(tmp_path)
    sessions, _ = load_sessions([tmp_path])
    report = evaluate(sessions, load_model())
    assert sorted(report.by_session) == ["id-one", "id-two", "plain"]
    fold_sessions = sum(f.sessions for f in folds(report.by_session, report.origins) if f.scheme == "fold")
    assert fold_sessions == 3
    assert set(report.by_split) <= {session_split(i) for i in ("id-one", "id-two", "plain")}


def test_the_bootstrap_is_the_same_every_run_and_brackets_the_whole_sample() -> None:
    by_session = {f"s{n}": _outcome(10, n % 3, 10_000, 3000 + 500 * (n % 5)) for n in range(20)}
    gone, removed = bootstrap(by_session)
    assert (gone, removed) == bootstrap(by_session)
    whole = Outcome()
    for outcome in by_session.values():
        whole.add(outcome)
    assert gone.low is not None and gone.high is not None and removed.low is not None and removed.high is not None
    assert gone.low < gone_share(whole) < gone.high  # type: ignore[operator]
    assert removed.low < removed_share(whole) < removed.high  # type: ignore[operator]


def test_identical_sessions_give_no_spread_and_none_gives_an_empty_interval() -> None:
    gone, removed = bootstrap({f"s{n}": _outcome(4, 1, 100, 50) for n in range(5)})
    assert gone.low == gone.high == 0.25 and removed.low == removed.high == 0.5
    gone, removed = bootstrap({})
    assert gone.low is gone.high is None and removed.low is removed.high is None
    gone, _ = bootstrap({"s": _outcome(0, 0, 100, 50)})  # nothing reused: no share to draw
    assert gone.low is None


def test_signs_count_the_cut_outputs_that_carry_them() -> None:
    def cut(gone: bool, **signs: bool) -> CutOutput:
        flags = {"edited_since": False, "named_since": False, "recent": False, "error": False, **signs}
        return CutOutput("g", 0.4, "t1", "Read", 1000, 3, "budget", gone, gone, **flags)

    rows = {r.name: r for r in signal_rows([cut(True, recent=True), cut(False, recent=True, named_since=True), cut(False)])}
    assert (rows["every cut output"].cut, rows["every cut output"].gone) == (3, 1)
    assert (rows["recent"].cut, rows["recent"].gone, rows["recent"].chars) == (2, 1, 2000)
    assert (rows["file named since"].cut, rows["file named since"].reused) == (1, 0)
    assert (rows["none of these"].cut, rows["none of these"].gone) == (1, 0)


def test_evaluate_keeps_each_sessions_figures_and_every_cut_output(tmp_path: Path) -> None:
    for source, name, big in (("a", "x", 12000), ("a", "y", 3000), ("b", "z", 15000), ("b", "w", 9000)):
        (tmp_path / source).mkdir(exist_ok=True)
        write_session(tmp_path / source / f"{name}.jsonl", reuse_session(name in "xz", big=big, name=name))
    sessions, _ = load_sessions([tmp_path])
    report = evaluate(sessions, load_model())
    pipeline = report.outcomes[PIPELINE]
    total = Outcome()
    for outcome in report.by_session.values():
        total.add(outcome)
    assert total == pipeline
    assert {origin[0] for origin in report.origins.values()} == {"a", "b"}
    assert report.cut, "the large reads are cut"
    assert sum(c.gone for c in report.cut) == pipeline.gone
    assert all(c.chars > 0 and c.reason for c in report.cut)


def test_the_page_and_the_json_show_the_variance(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    paths = [
        str(write_session(tmp_path / "s" / f"{name}.jsonl", reuse_session(name in "ab", big=big, name=name)))
        for name, big in (("a", 12000), ("b", 3000), ("c", 9000), ("d", 3000))
    ]
    page = tmp_path / "quality.md"
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "eval", *paths, "--json", "--markdown", str(page)],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["robustness"]
    assert {f["scheme"] for f in doc["folds"]} == {"source", "project", "fold"}
    assert sum(f["reused"] for f in doc["folds"] if f["scheme"] == "fold") == json.loads(proc.stdout)["policies"][PIPELINE]["reused"]
    assert doc["bootstrap"]["resamples"] > 0 and doc["signals"][0]["name"] == "every cut output"
    text = page.read_text(encoding="utf-8")
    assert "## Variance across sessions" in text and "Sessions drawn with replacement" in text
