"""The judge fitted without a source, scored on it: per source, per feature group, and what ships."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from eval_sessions import Transcript
from fast_jev_compaction.evaluation.fit import (
    FEATURE_GROUPS,
    FITTED_FEATURES,
    MIN_REUSED_OUTPUTS,
    UNFITTED_GROUPS,
    Row,
    fit_report,
    group_transfer,
    leave_one_source_out,
)
from fast_jev_compaction.evaluation.transfer_report import SECTION_END, SECTION_START, section_of, with_section
from fast_jev_compaction.judge.features import FEATURE_NAMES
from fast_jev_compaction.judge.model import load_model
from test_judge_model import trained_on as record_training

SIZE = FEATURE_NAMES.index("size_log")


def _rows(source: str, sessions: int, per_session: int, seed: int) -> list[Row]:
    """Rows whose label follows the output's size (and noise): size alone ranks them well."""
    rng = random.Random(seed)
    rows = []
    for s in range(sessions):
        for n in range(per_session):
            values = dict.fromkeys(FEATURE_NAMES, 0.0)
            values["size_log"] = rng.uniform(1, 5)
            values["recency"] = rng.random()
            label = 2.0 * values["size_log"] - 7 + rng.gauss(0, 1) > 0
            rows.append(
                Row(f"{source}-{s}", 0.5, f"{s}-{n}", tuple(values[f] for f in FEATURE_NAMES), label,
                    round(10 ** values["size_log"]), 0, source)
            )
    return rows


def _corpus() -> list[Row]:
    # "small" has a single reused output at most: too few to be held out
    small = _rows("small", 2, 12, 3)
    small = [r if r.label is False or r.tool_use_id == next(x.tool_use_id for x in small if x.label) else
             Row(r.group, r.fraction, r.tool_use_id, r.x, False, r.result_chars, r.since, r.source) for r in small]
    return _rows("alpha", 4, 40, 1) + _rows("beta", 4, 40, 2) + small


def test_each_source_is_scored_by_a_fit_without_it_and_a_small_one_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _corpus()
    trained_on = record_training(monkeypatch, "source")
    folds = {fold.source: fold for fold in leave_one_source_out(rows)}
    assert trained_on == [{"beta", "small"}, {"alpha", "small"}]  # never the source it scores
    assert folds["small"].reused_outputs < MIN_REUSED_OUTPUTS and folds["small"].held_out_auc is None
    for name in ("alpha", "beta"):
        fold = folds[name]
        assert fold.reused_outputs >= MIN_REUSED_OUTPUTS and fold.sessions == 4 and fold.rows == 160
        assert fold.held_out_auc is not None and fold.held_out_auc > 0.8
        assert fold.size_auc is not None and fold.size_auc > 0.8


def test_one_source_alone_has_nothing_to_be_held_out_from() -> None:
    folds = leave_one_source_out(_rows("alpha", 4, 40, 1))
    assert [(f.source, f.held_out_auc) for f in folds] == [("alpha", None)]


def test_taking_away_the_group_that_carries_the_signal_costs_what_it_carries() -> None:
    rows = _corpus()
    transfer = group_transfer(rows, FITTED_FEATURES)
    assert set(transfer) == set(FEATURE_GROUPS)
    assert set(transfer["size"]) == {"alpha", "beta"}
    shipped = {f.source: f.held_out_auc for f in fit_report(rows).by_source if f.held_out_auc is not None}
    for source, value in transfer["size"].items():
        assert value is not None and value < shipped[source] - 0.2  # the label follows size
    for source, value in transfer["ids"].items():
        assert value == pytest.approx(shipped[source], abs=0.05)  # a feature without signal changes little


def test_the_fit_uses_only_the_chosen_features() -> None:
    assert not set(FITTED_FEATURES) & {f for g in UNFITTED_GROUPS for f in FEATURE_GROUPS[g]}
    report = fit_report(_corpus())
    assert report.features == FITTED_FEATURES and len(report.weights) == len(FITTED_FEATURES) + 1


def test_the_shipped_judge_ranks_every_source_held_out_above_size_alone() -> None:
    fit = load_model().fit
    held_out, size = fit["held_out_source_auc"], fit["size_auc_by_source"]
    assert held_out and set(held_out) == set(size)
    assert all(held_out[source] >= size[source] for source in held_out), (held_out, size)


def test_the_transfer_section_replaces_its_old_self_and_leaves_the_page_alone() -> None:
    section = f"{SECTION_START}\n## Judge transfer across sources\nnew\n{SECTION_END}"
    page = "# Quality\n\nintro\n\n## Fire points\n\nfigures\n"
    once = with_section(page, section)
    assert once.startswith(page.rstrip("\n")) and section_of(once) == section
    old = section.replace("new", "old")
    middle = with_section(page, old) + "\n## After\n\nmore\n"
    replaced = with_section(middle, section)
    assert section_of(replaced) == section and "old" not in replaced and replaced.endswith("## After\n\nmore\n")


def _session(path: Path, session_id: str, reused: bool, name: str) -> Path:
    """A Read of a long file, then filler, then an Edit quoting its first line (when ``reused``)."""
    first = f"# {name}: parse tokens from the stream while skipping every whitespace token quietly"
    body = "\n".join([first, *(f"x_{name}_{n} = {n}" for n in range(400))])
    t = Transcript(session_id).prompt("Fix the parser so whitespace is handled")
    t.tool(f"{name}r", "Read", body, file_path=f"/src/{name}.py")
    for n in range(8):
        t.tool(f"{name}f{n}", "Bash", f"step {n}", command=f"echo step {n}")
    quoted = first if reused else "a"
    t.tool(f"{name}e", "Edit", "The file has been updated.", file_path=f"/src/{name}.py", old_string=quoted, new_string="b")
    return t.said("Done.").write(path)


def test_the_fit_counts_a_session_once_across_its_files_and_writes_its_section(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    for source in ("one", "two"):
        (folder / source).mkdir(parents=True)
    _session(folder / "one" / "a.jsonl", "session-a", True, "a")
    _session(folder / "one" / "a-copy.jsonl", "session-a", False, "acopy")  # the same session, another file
    _session(folder / "one" / "b.jsonl", "session-b", False, "b")
    _session(folder / "two" / "c.jsonl", "session-c", True, "c")
    _session(folder / "two" / "d.jsonl", "session-d", False, "d")
    page = tmp_path / "quality.md"
    page.write_text("# Quality\n\nkept as it is\n", encoding="utf-8")
    proc = _eval(str(folder), "--fit", "--no-eval", "--weights", str(tmp_path / "w.json"), "--markdown", str(page))
    assert proc.returncode == 0, proc.stderr
    assert load_model(tmp_path / "w.json").fit["sessions"] == 4
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Quality\n\nkept as it is\n")
    section = section_of(text)
    assert section is not None
    assert "| one | 2 |" in section and "| two | 2 |" in section
    # the evaluation's own run of the page keeps the section, which only a fit writes
    proc = _eval(str(folder), "--markdown", str(page))
    assert proc.returncode == 0, proc.stderr
    text = page.read_text(encoding="utf-8")
    assert "## Fire points" in text and section_of(text) == section


def _eval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fast_jev_compaction.cli", "eval", *args],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
