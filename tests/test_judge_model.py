"""Call features (from the past only), the fitted model's file and scores, and the fit itself."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from eval_sessions import SENTENCE, call, filler, prompt, result, reuse_session, said
from fast_jev_compaction.conversation.pairing import pair_tool_calls
from fast_jev_compaction.evaluation import fit as fitting
from fast_jev_compaction.evaluation.fit import (
    FITTED_FEATURES,
    Row,
    fit_logistic,
    fitted_model,
    leave_one_session_out,
    session_rows,
)
from fast_jev_compaction.judge.features import FEATURE_NAMES, call_features
from fast_jev_compaction.judge.model import JudgeModel, ModelError, load_model, parse_model, score_calls


def _features(messages, goal=""):
    return call_features(messages, pair_tool_calls(messages, 0), goal)


def test_reuse_so_far_counts_only_the_messages_given() -> None:
    messages = [prompt("look"), call("r", "Read", file_path="/a.py"), result("r", SENTENCE), said(f"So: {SENTENCE}")]
    assert _features(messages)["r"]["reused"] == 1.0
    assert _features(messages[:3])["r"]["reused"] == 0.0


def test_features_of_a_prefix_do_not_depend_on_what_follows() -> None:
    reused, unused = reuse_session(True), reuse_session(False)
    a = {r.tool_use_id: r for r in session_rows(reused, "a", [0.6])}
    b = {r.tool_use_id: r for r in session_rows(unused, "b", [0.6])}
    assert a["sr"].x == b["sr"].x  # same past ...
    assert a["sr"].label and not b["sr"].label  # ... different future


def test_a_read_edited_later_without_a_re_read_is_flagged_and_a_re_read_supersedes_it() -> None:
    read = [call("r", "Read", file_path="/a.py"), result("r", SENTENCE)]
    edit = [call("e", "Edit", file_path="/a.py", old_string="x", new_string="y"), result("e", "ok")]
    reread = [call("r2", "Read", file_path="/a.py"), result("r2", SENTENCE)]
    edited = _features([prompt("go"), *read, *edit])["r"]
    assert edited["edited_unread"] == 1.0 and edited["superseded"] == 0.0
    fresh = _features([prompt("go"), *read, *edit, *reread])["r"]
    assert fresh["edited_unread"] == 0.0 and fresh["superseded"] == 1.0


def test_kinds_errors_goal_and_size_are_read_from_the_call_and_its_body() -> None:
    messages = [
        prompt("go"),
        call("q", "AskUserQuestion", questions=[{"question": "Which database?"}]),
        result("q", "Postgres"),
        call("t", "Bash", command="pytest -q"),
        result("t", "FAILED tests/test_parser.py::test_tokens - AssertionError\n1 failed", is_error=True),
    ]
    features = _features(messages, goal="make test_parser pass for whitespace tokens")
    assert features["q"]["kind_decision"] == 1.0
    test = features["t"]
    assert test["kind_test_build"] == 1.0 and test["is_error"] == 1.0
    assert test["error_lines"] > 0 and test["goal_overlap"] > 0
    assert test["size_log"] == pytest.approx(math.log10(len(messages[4].toolResults[0].text) + 1))
    assert set(test) == set(FEATURE_NAMES)


def _model(**weights: float) -> JudgeModel:
    return JudgeModel(bias=0.0, weights=weights, call_floors={"edit": 0.9}, error_floor=0.6)


def test_scores_follow_the_weights_and_keep_call_never_falls_below_keep_result() -> None:
    messages = [
        prompt("go"),
        call("e", "Edit", file_path="/a.py", old_string="x", new_string="y"),
        result("e", "ok"),
        call("b", "Bash", command="ls"),
        result("b", "a.py", is_error=True),
        call("r", "Read", file_path="/a.py"),
        result("r", "x"),
    ]
    scores = score_calls(messages, pair_tool_calls(messages, 0), "", _model(kind_read=2.0))
    assert scores["r"][1] == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert scores["e"] == pytest.approx((1 - 0.5 * 0.1, 0.5))
    assert scores["b"] == pytest.approx((1 - 0.5 * 0.4, 0.5))
    assert all(0 <= r <= c <= 1 for c, r in scores.values())
    model = _model(kind_read=2.0, size_log=0.5)
    values = _features(messages)["r"]
    assert model.contributions(values) == pytest.approx({"bias": 0.0, "kind_read": 2.0, "size_log": 0.5 * math.log10(2)})


def test_the_shipped_weights_load_and_name_the_fitted_features() -> None:
    model = load_model()
    assert set(model.weights) == set(FITTED_FEATURES)
    assert model.fit["loso_auc"] > model.fit["size_auc"] and model.fit["loso_auc"] > model.fit["recency_auc"]
    messages = reuse_session(True)
    scores = score_calls(messages, pair_tool_calls(messages, 6), "fix the parser")
    assert scores and all(0 < r <= c < 1 for c, r in scores.values())


def test_a_model_file_round_trips_and_bad_files_are_refused(tmp_path: Path) -> None:
    model = _model(size_log=0.5)
    path = tmp_path / "w.json"
    path.write_text(json.dumps(model.to_json()))
    assert load_model(path) == model
    good = model.to_json()
    for broken in (
        {**good, "format": 2},
        {**good, "keep_result": {"bias": 0, "weights": {"no_such_feature": 1.0}}},
        {**good, "keep_result": {"bias": float("nan"), "weights": {}}},
        {**good, "keep_call": {"floors": {"edit": 1.5}}},
        {"format": 1},
    ):
        with pytest.raises(ModelError):
            parse_model(broken)
    with pytest.raises(ModelError):
        load_model(tmp_path / "missing.json")


def _rows(groups: int = 6, per_group: int = 40, seed: int = 7) -> list[Row]:
    """Rows whose label follows size and recency, with noise."""
    rng = random.Random(seed)
    rows = []
    for g in range(groups):
        for n in range(per_group):
            values = dict.fromkeys(FEATURE_NAMES, 0.0)
            values["size_log"] = rng.uniform(1, 5)
            values["recency"] = rng.random()
            values["kind_read" if n % 2 else "kind_shell"] = 1.0
            logit = 2.0 * values["size_log"] - 6 + 2 * values["recency"] + rng.gauss(0, 1)
            rows.append(
                Row(f"g{g}", 0.5, f"{g}-{n}", tuple(values[f] for f in FEATURE_NAMES), logit > 0, 0, 0)
            )
    return rows


def test_the_fit_is_deterministic_and_reaches_the_optimum() -> None:
    rows = _rows()
    first, second = fit_logistic(rows), fit_logistic(rows)
    assert first == second
    gradient = fitting._gradient(fitting._design(rows), [r.label for r in rows], first, fitting.L2)
    assert max(abs(g) for g in gradient) < 1e-6
    size = FEATURE_NAMES.index("size_log") + 1
    assert first[size] > 1.0  # the signal planted in the rows is found
    report = fitting.fit_report(rows)
    assert json.dumps(fitted_model(report, 6).to_json(), sort_keys=True) == json.dumps(
        fitted_model(fitting.fit_report(rows), 6).to_json(), sort_keys=True
    )


def trained_on(monkeypatch: pytest.MonkeyPatch, field: str) -> list[set[str]]:
    """Each fit's training rows by ``field`` (their sessions or sources), recorded as the real
    fit runs."""
    seen: list[set[str]] = []
    real = fitting.fit_logistic

    def spy(train, *args, **kwargs):
        seen.append({getattr(r, field) for r in train})
        return real(train, *args, **kwargs)

    monkeypatch.setattr(fitting, "fit_logistic", spy)
    return seen


def test_leave_one_session_out_never_trains_on_the_held_out_session(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows()
    full = fit_logistic(rows)
    seen = trained_on(monkeypatch, "group")
    predictions = leave_one_session_out(rows, full)
    groups = sorted({r.group for r in rows})
    assert [sorted(set(groups) - s) for s in seen] == [[g] for g in groups]
    assert len(predictions) == len(rows)


def test_each_fold_equals_a_fresh_fit_without_that_session() -> None:
    rows = _rows()
    predictions = leave_one_session_out(rows, fit_logistic(rows))
    train = [r for r in rows if r.group != "g0"]
    fresh = fit_logistic(train)
    for i, row in enumerate(rows):
        if row.group == "g0":
            assert predictions[i] == pytest.approx(fitting.predict(fresh, row.x), abs=1e-7)


def test_session_rows_use_only_unpinned_calls_and_label_them_by_the_suffix() -> None:
    messages = [prompt("look"), *filler(2), call("r", "Read", file_path="/a.py"), result("r", SENTENCE), *filler(6, 2), said(SENTENCE)]
    rows = session_rows(messages, "s", [0.7])
    fire = round(len(messages) * 0.7)
    pinned_from = fire - 6
    ids = {r.tool_use_id for r in rows}
    assert "r" in ids and all(int(i[1:]) < 2 or i == "r" for i in ids if i.startswith("f"))
    assert next(r for r in rows if r.tool_use_id == "r").label
    assert all(
        messages_index < pinned_from
        for messages_index in (i for i, m in enumerate(messages[:fire]) for u in m.toolUses if u.tool_use_id in ids)
    )


def test_separable_rows_still_give_finite_weights_in_every_fold() -> None:
    rng = random.Random(1)
    rows = []
    for g in range(5):
        for n in range(30):
            values = dict.fromkeys(FEATURE_NAMES, 0.0)
            values["size_log"] = rng.uniform(0, 6)
            rows.append(Row(f"g{g}", 0.5, f"{g}-{n}", tuple(values[f] for f in FEATURE_NAMES), values["size_log"] > 3, 0, 0))
    weights = fit_logistic(rows)
    assert all(math.isfinite(w) for w in weights) and weights[FEATURE_NAMES.index("size_log") + 1] > 1
    predictions = leave_one_session_out(rows, weights)
    assert all(0 < p < 1 for p in predictions)
