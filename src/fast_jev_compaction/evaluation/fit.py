"""Fitting the judge's keep_result model on behavioural labels, and testing it leave-one-session-out.

A row is one unpinned call present at a fire point of a session: its features are computed from
the prefix alone (what the compaction would see), its label is whether the rest of the session
reused its output. The model is an L2-regularised logistic regression fitted by Newton's method
in plain Python; every held-out session is predicted by a model fitted without any of its rows,
and every source (a published collection of sessions) by one fitted without that source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping, Sequence

from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing, pair_tool_calls
from ..decide.policy import CHEAP
from ..judge.features import FEATURE_NAMES, call_features, feature_vector
from ..judge.model import JudgeModel
from ..judge.reuse import build_reuse_index
from ..options import CompactOptions
from ..state.goal import goal_from_messages
from .firepoints import fire_index
from .labels import OutputLabel, label_outputs
from .metrics import auc

FIT_FIRE_POINTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
L2 = 1.0

# The features in groups, as the transfer check (:func:`group_transfer`) adds or removes them.
FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "size": ("size_log",),
    "tiny": ("tiny",),
    "kind": tuple(name for name in FEATURE_NAMES if name.startswith("kind_")),
    "is_error": ("is_error",),
    "error_lines": ("error_lines",),
    "session_fraction": ("age_fraction", "calls_after_fraction"),
    "recency": ("recency",),
    "prompts_after": ("prompts_after",),
    "superseded": ("superseded",),
    "edited_unread": ("edited_unread",),
    "reuse": ("reused", "reused_log", "reuse_recency"),
    "later_text_overlap": ("later_text_overlap",),
    "goal_and_prompt_overlap": ("goal_overlap", "prompt_overlap"),
    "target_mentioned_later": ("target_mentioned_later",),
    "ids": ("ids_log",),
}
# Left out of the shipped fit. Found by taking groups out one at a time, each time the one whose
# absence most raised the mean held-out AUC over the corpus's sources (each source scored by the
# judge fitted without it, and by the judge fitted on each other source alone: nine figures over
# claude-code-log, entire-checkpoints and spotter), from 0.899 with every feature to 0.911 after
# seven groups; most steps were within noise. Those kept out read how one harness or collection
# records a session rather than what an output holds: the tool names (kinds; the call floors
# still use them), positions as fractions of the session's length, how prompts are split, whether
# a file's name comes up again, a re-run. ``tiny`` repeats ``size_log``. The overlap with the goal
# and the latest prompt went third (+0.002); it stays, as it points the same way in every source
# (AUC 0.65 to 0.73 alone) and reads what the user asks for (0.910 with it kept). The search then
# took ``ids`` and ``later_text_overlap`` for +0.001 more, noise: they stay too. docs/quality.md
# shows each group's effect on the held-out sources.
UNFITTED_GROUPS = ("kind", "session_fraction", "prompts_after", "target_mentioned_later", "superseded", "tiny")
FITTED_FEATURES: tuple[str, ...] = tuple(
    name for name in FEATURE_NAMES if not any(name in FEATURE_GROUPS[group] for group in UNFITTED_GROUPS)
)
# A source's held-out AUC is reported from this many distinct reused outputs: below it, a handful
# of outputs decide the figure.
MIN_REUSED_OUTPUTS = 20
_MAX_ITERATIONS = 100
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Row:
    group: str  # the session: rows of one group are held out together
    fraction: float
    tool_use_id: str
    x: tuple[float, ...]  # in FEATURE_NAMES order (a projection's: :func:`projected`)
    label: bool
    result_chars: int
    since: int  # messages between the result and the fire point
    source: str = ""  # the collection the session comes from (corpus.session_origin)


# ``{tool_use_id: features}`` of a prefix's candidates, given the prefix, its pairing and its goal.
FeatureSource = Callable[[Sequence[SessionMessage], Pairing, str], Mapping[str, Mapping[str, float]]]


def message_features(messages: Sequence[SessionMessage], pairing: Pairing, goal: str) -> Mapping[str, Mapping[str, float]]:
    """The features the in-process judge computes from the messages themselves."""
    return call_features(messages, pairing, goal, build_reuse_index(messages))


def session_rows(
    messages: Sequence[SessionMessage],
    group: str,
    fractions: Iterable[float],
    labels: Mapping[str, OutputLabel] | None = None,
    features_of: FeatureSource = message_features,
    source: str = "",
) -> list[Row]:
    """The rows of one session (``group``: its id, which its subagents and copies share), from
    ``source``: its unpinned calls at each fire point, features from the prefix (read from the
    messages, or as ``features_of`` reads them)."""
    if len(messages) < 2:
        return []
    labels = labels if labels is not None else label_outputs(messages)
    preserve = CompactOptions().preserve_recent_messages
    rows: list[Row] = []
    for fraction in fractions:
        fire = fire_index(len(messages), fraction)
        head = list(messages[:fire])
        pairing = pair_tool_calls(head, preserve)
        if not pairing.candidates:
            continue
        features = features_of(head, pairing, goal_from_messages(head))
        for call in pairing.candidates:
            rows.append(
                Row(
                    group=group,
                    fraction=fraction,
                    tool_use_id=call.tool_use_id,
                    x=tuple(feature_vector(features[call.tool_use_id])),
                    label=labels[call.tool_use_id].needed_after(fire),
                    result_chars=call.result_chars,
                    since=fire - 1 - call.result_index,
                    source=source,
                )
            )
    return rows


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Solve a symmetric positive-definite system by Cholesky decomposition."""
    n = len(vector)
    lower = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            total = matrix[i][j] - sum(lower[i][k] * lower[j][k] for k in range(j))
            if i == j:
                lower[i][i] = math.sqrt(max(total, 1e-12))
            else:
                lower[i][j] = total / lower[j][j]
    y = [0.0] * n
    for i in range(n):
        y[i] = (vector[i] - sum(lower[i][k] * y[k] for k in range(i))) / lower[i][i]
    x = [0.0] * n
    for i in range(n - 1, -1, -1):
        x[i] = (y[i] - sum(lower[k][i] * x[k] for k in range(i + 1, n))) / lower[i][i]
    return x


def _design(rows: Sequence[Row]) -> list[list[tuple[int, float]]]:
    """Sparse rows with the bias as column 0."""
    return [[(0, 1.0)] + [(j + 1, v) for j, v in enumerate(row.x) if v] for row in rows]


def _hessian(design: Sequence[Sequence[tuple[int, float]]], w: Sequence[float], l2: float) -> list[list[float]]:
    n = len(w)
    h = [[0.0] * n for _ in range(n)]
    for x in design:
        p = sigmoid(sum(w[j] * v for j, v in x))
        s = p * (1 - p)
        for a, va in x:
            row = h[a]
            for b, vb in x:
                if b <= a:
                    row[b] += s * va * vb
    for a in range(n):
        for b in range(a):
            h[b][a] = h[a][b]
        h[a][a] += l2 if a else 1e-6
    return h


def _gradient(design: Sequence[Sequence[tuple[int, float]]], y: Sequence[bool], w: Sequence[float], l2: float) -> list[float]:
    g = [l2 * w[j] if j else 0.0 for j in range(len(w))]
    for x, label in zip(design, y):
        r = sigmoid(sum(w[j] * v for j, v in x)) - (1.0 if label else 0.0)
        for j, v in x:
            g[j] += r * v
    return g


def fit_logistic(
    rows: Sequence[Row],
    l2: float = L2,
    start: Sequence[float] | None = None,
    hessian: list[list[float]] | None = None,
) -> list[float]:
    """Weights ``[bias, w_1, ...]`` minimising log loss + l2/2 |w|^2 (the bias is not penalised).

    With ``hessian`` given the iteration keeps that matrix (a cheap, still exact fixed point:
    the gradient is exact), which is how the leave-one-out folds reuse the full fit; should that
    not settle, plain Newton steps finish from where it got, so the start point never decides
    the answer (the objective is strictly convex: one optimum).
    """
    design = _design(rows)
    y = [row.label for row in rows]
    w = list(start) if start is not None else [0.0] * (len(rows[0].x) + 1 if rows else 1)
    for fixed in ((True, False) if hessian is not None else (False,)):
        for _ in range(_MAX_ITERATIONS):
            h = hessian if fixed and hessian is not None else _hessian(design, w, l2)
            step = _solve(h, _gradient(design, y, w, l2))
            w = [a - b for a, b in zip(w, step)]
            if max(abs(s) for s in step) < _TOLERANCE:
                return w
    raise ArithmeticError("the logistic fit did not converge")


def predict(w: Sequence[float], x: Sequence[float]) -> float:
    return sigmoid(w[0] + sum(a * b for a, b in zip(w[1:], x)))


def leave_one_session_out(rows: Sequence[Row], full: Sequence[float], l2: float = L2) -> list[float]:
    """A prediction for every row from a model fitted without its session's rows."""
    design = _design(rows)
    full_hessian = _hessian(design, full, l2)
    groups = sorted({row.group for row in rows})
    predictions = [0.0] * len(rows)
    for group in groups:
        held = [i for i, row in enumerate(rows) if row.group == group]
        train = [row for row in rows if row.group != group]
        if not any(r.label for r in train) or all(r.label for r in train):
            raise ValueError("a fold without both classes cannot be fitted")
        # the full fit's curvature minus the held-out rows' share, as the fold's fixed Hessian
        held_hessian = _hessian([design[i] for i in held], full, 0.0)
        fold_hessian = [
            [a - b for a, b in zip(row_full, row_held)] for row_full, row_held in zip(full_hessian, held_hessian)
        ]
        w = fit_logistic(train, l2, start=full, hessian=fold_hessian)
        for i in held:
            predictions[i] = predict(w, rows[i].x)
    return predictions


def projected(rows: Sequence[Row], features: Sequence[str]) -> list[Row]:
    """``rows`` with only ``features`` (in that order) of their FEATURE_NAMES values."""
    columns = [FEATURE_NAMES.index(name) for name in features]
    return [replace(row, x=tuple(row.x[c] for c in columns)) for row in rows]


def reused_outputs(rows: Iterable[Row]) -> int:
    """How many distinct outputs the rows hold that were reused after some fire point."""
    return len({(row.group, row.tool_use_id) for row in rows if row.label})


@dataclass(frozen=True)
class SourceFold:
    source: str
    sessions: int
    rows: int
    reused_outputs: int
    # ranked by the judge fitted on the other sources; None under MIN_REUSED_OUTPUTS (or with no other source)
    held_out_auc: float | None
    size_auc: float | None  # ranked by the output's size alone


def _held_out_sources(rows: Sequence[Row]) -> list[str]:
    """The sources with enough reused outputs to be held out, when there are others to fit on."""
    sources = sorted({row.source for row in rows})
    if len(sources) < 2:
        return []
    return [s for s in sources if reused_outputs(r for r in rows if r.source == s) >= MIN_REUSED_OUTPUTS]


def _source_auc(rows: Sequence[Row], source: str, l2: float) -> float | None:
    """The AUC on ``source``'s rows of the model fitted on every other source's rows."""
    held = [row for row in rows if row.source == source]
    train = [row for row in rows if row.source != source]
    if not any(r.label for r in train) or all(r.label for r in train):
        return None
    w = fit_logistic(train, l2)
    return auc([predict(w, row.x) for row in held], [row.label for row in held])


def leave_one_source_out(rows: Sequence[Row], l2: float = L2) -> list[SourceFold]:
    """Per source: its counts, the AUC of the model fitted without it, and output size's AUC."""
    tested = set(_held_out_sources(rows))
    folds = []
    for source in sorted({row.source for row in rows}):
        held = [row for row in rows if row.source == source]
        labels = [row.label for row in held]
        folds.append(
            SourceFold(
                source=source,
                sessions=len({row.group for row in held}),
                rows=len(held),
                reused_outputs=reused_outputs(held),
                held_out_auc=_source_auc(rows, source, l2) if source in tested else None,
                size_auc=auc([float(row.result_chars) for row in held], labels),
            )
        )
    return folds


def group_transfer(rows: Sequence[Row], features: Sequence[str], l2: float = L2) -> dict[str, dict[str, float | None]]:
    """For each feature group, the held-out AUC of every source that can be held out, with the
    group added to ``features`` (a group left out) or taken from them (a group fitted). ``rows``
    carry every feature (FEATURE_NAMES order)."""
    sources = _held_out_sources(rows)
    if not sources:
        return {}
    out: dict[str, dict[str, float | None]] = {}
    for group, members in FEATURE_GROUPS.items():
        fitted = any(name in features for name in members)
        chosen = set(features) - set(members) if fitted else set(features) | set(members)
        picked = projected(rows, [name for name in FEATURE_NAMES if name in chosen])
        out[group] = {source: _source_auc(picked, source, l2) for source in sources}
    return out


@dataclass(frozen=True)
class FitReport:
    features: tuple[str, ...]  # the features fitted, in FEATURE_NAMES order
    weights: list[float]  # [bias, *features]
    rows: int
    positives: int
    sessions: int
    loso_auc: float | None
    size_auc: float | None
    recency_auc: float | None
    in_sample_auc: float | None
    loso_by_fraction: dict[str, float | None]
    by_source: list[SourceFold]
    # group -> {source: held-out AUC with the group added or taken away}, and with every feature
    by_group: dict[str, dict[str, float | None]]
    all_features: dict[str, float | None]


def fit_report(rows: Sequence[Row], l2: float = L2, features: Sequence[str] = FITTED_FEATURES) -> FitReport:
    """The fit of ``features`` on ``rows`` (which carry every feature), tested leave-one-session-out
    and leave-one-source-out, with the transfer of each feature group."""
    features = tuple(name for name in FEATURE_NAMES if name in features)
    everything = rows
    rows = projected(rows, features)
    labels = [row.label for row in rows]
    weights = fit_logistic(rows, l2)
    held_out = leave_one_session_out(rows, weights, l2)
    by_fraction: dict[str, float | None] = {}
    for fraction in sorted({row.fraction for row in rows}):
        picked = [i for i, row in enumerate(rows) if row.fraction == fraction]
        by_fraction[f"{fraction:.1f}"] = auc([held_out[i] for i in picked], [labels[i] for i in picked])
    return FitReport(
        features=features,
        weights=weights,
        rows=len(rows),
        positives=sum(labels),
        sessions=len({row.group for row in rows}),
        loso_auc=auc(held_out, labels),
        size_auc=auc([float(row.result_chars) for row in rows], labels),
        recency_auc=auc([-float(row.since) for row in rows], labels),
        in_sample_auc=auc([predict(weights, row.x) for row in rows], labels),
        loso_by_fraction=by_fraction,
        by_source=leave_one_source_out(rows, l2),
        by_group=group_transfer(everything, features, l2),
        all_features={source: _source_auc(everything, source, l2) for source in _held_out_sources(everything)},
    )


# The reuse risk at which the shipped judge's keep_call answers 0.5 (judge/model.py). The model's
# probabilities sit near the base rate of reuse (a few per cent), and keep_call's question is
# Jev's, "should this call stay?", which the threshold policy reads at 0.5 (keep_result, "should
# its full output stay?", is the reuse probability itself: more likely reused than not). The
# budget policy, tuned on the reuse scale, cuts a small old output as cheap under a reuse risk of
# policy.CHEAP: below that risk its record is not worth its room, so that risk is where the
# call's answer turns. The map is monotone and keep_call only breaks the budget's ties between
# equal keep_results, which it still orders as before: the budget decides as it did.
CALL_REUSE_AT_EVEN = CHEAP

# keep_call is not fitted (see judge/model.py): the floor of each kind says what losing the record
# of such a call costs. Changes, side effects and user answers cannot be had again; a sub-agent's
# run is slow to repeat; a test or build run says what state the code was in.
CALL_FLOORS = {"edit": 0.9, "side_effect": 0.9, "decision": 0.95, "agent": 0.6, "test_build": 0.3, "todo": 0.2}
ERROR_FLOOR = 0.6


def fitted_model(report: FitReport, files: int, l2: float = L2) -> JudgeModel:
    """The model to ship: the weights (rounded so the file diffs well) and the fit's report."""
    rounded = [round(w, 6) for w in report.weights]
    return JudgeModel(
        bias=rounded[0],
        weights=dict(zip(report.features, rounded[1:])),
        call_floors=dict(CALL_FLOORS),
        error_floor=ERROR_FLOOR,
        call_reuse_at_even=CALL_REUSE_AT_EVEN,
        fit={
            "method": "L2 logistic regression, Newton, plain Python",
            "l2": l2,
            "fire_points": list(FIT_FIRE_POINTS),
            "files": files,
            "sessions": report.sessions,
            "rows": report.rows,
            "positives": report.positives,
            "loso_auc": _rounded(report.loso_auc),
            "size_auc": _rounded(report.size_auc),
            "recency_auc": _rounded(report.recency_auc),
            "in_sample_auc": _rounded(report.in_sample_auc),
            "loso_auc_by_fire_point": {k: _rounded(v) for k, v in report.loso_by_fraction.items()},
            "held_out_source_auc": {f.source: _rounded(f.held_out_auc) for f in report.by_source if f.held_out_auc is not None},
            "size_auc_by_source": {f.source: _rounded(f.size_auc) for f in report.by_source if f.held_out_auc is not None},
        },
    )


def _rounded(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None
