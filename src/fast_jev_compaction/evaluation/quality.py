"""The quality evaluation: compact each session at its fire points and see what the rest reused.

For every session and fire point the prefix is compacted by the pipeline at its defaults (the
public ``compact()`` with ``LocalJudge``) and by the fixed baselines; each compacted prefix is
then checked against the labels of the outputs the suffix reused (:mod:`.outcome`), and the
unpinned calls are ranked by the judges and by size and recency (:mod:`.metrics`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ..compaction import CompactResult, compact_sync, run_sync
from ..conversation.messages import SessionMessage
from ..conversation.pairing import Pairing, ToolCall, is_recent, pair_tool_calls
from ..conversation.sizes import message_chars
from ..decide.archive import write_archive
from ..decide.decisions import KEEP
from ..decide.policy import CHARS_PER_TOKEN
from ..decide.turn_eviction import in_flight_chars, in_flight_preserve, least_chars
from ..judge.features import call_features, feature_vector
from ..judge.local import LocalJudge
from ..judge.model import JudgeModel
from ..judge.reuse import build_reuse_index
from ..ladder import compact_to_fit
from ..options import CompactOptions
from ..state.goal import goal_from_messages
from .corpus import Session, session_split
from .firepoints import EVAL_FIRE_POINTS, fire_index
from .fit import FITTED_FEATURES, Row, fit_logistic, leave_one_session_out, projected
from .foresight import prefix_foresight
from .frontier import POLICIES as FRONTIER
from .frontier import cut_by_policy
from .labels import OutputLabel, label_outputs
from .metrics import auc
from .outcome import BASELINES, Context, Outcome, Scores, measure, original_results, result_chars
from .robustness import CutOutput
from .state_fit import STATE_FITTED_FEATURES
from .through_jev import HELD_OUT_MESSAGES, HELD_OUT_STATE, JevFigures, add_point
from .through_jev import Point as JevPoint

PIPELINE = "fast-jev (defaults)"
HELD_OUT = "fitted judge, held out"
SHIPPED = "fitted judge, shipped weights"
# Not the judge alone: what each call's decision carried, a rule's settled 0 or 1 among the
# judge's scores, so it ranks the whole pass.
DECIDED = "the pass's decisions"
RANKERS = (HELD_OUT, SHIPPED, DECIDED, "size", "recency")

Compactor = Callable[[list[SessionMessage], Path | None], tuple[CompactResult, dict[str, str]]]


def compact_at_defaults(messages: list[SessionMessage], archive: Path | None) -> tuple[CompactResult, dict[str, str]]:
    """The pipeline as a user gets it: default options, the embedded judge, cut outputs saved."""
    return _compacted(messages, CompactOptions(archive_dir=str(archive) if archive is not None else None))


def _compacted(messages: list[SessionMessage], options: CompactOptions) -> tuple[CompactResult, dict[str, str]]:
    result = compact_sync(messages, LocalJudge(), options)
    if result.archive:
        write_archive(result.archive)
    return result, dict(result.archive)


def window_filled(messages: Sequence[SessionMessage], fill_percent: float) -> int:
    """The window (tokens) that ``messages`` fill to ``fill_percent``, as the compaction estimates them."""
    return max(1, math.ceil(sum(map(message_chars, messages)) / CHARS_PER_TOKEN * 100 / fill_percent))


def _filled(
    head: list[SessionMessage], result: CompactResult, labels: dict[str, OutputLabel], fill_percent: float,
    folder: Path | None, outcome: Outcome,
) -> FilledPrefix:
    window = window_filled(head, fill_percent)

    def percent(chars: int) -> float:
        return 100 * chars / CHARS_PER_TOKEN / window

    return FilledPrefix(
        window=window,
        after=percent(result.stats.chars_after),
        in_flight=percent(in_flight_chars(result.messages)),
        floor=percent(least_chars(result.messages, str(folder) if folder is not None else "")),
        reused=outcome.reused,
        gone=outcome.gone,
        recoverable=outcome.recoverable,
        foresight_gone=prefix_foresight(head, labels, window, CompactOptions().target_percent)[1],
    )


def compact_in_window(fill_percent: float) -> Compactor:
    """The pipeline given a window each prefix fills to ``fill_percent`` and the default target,
    as the plugin's trigger hands it one: down the eviction ladder, with the pin widened to the
    exchange in flight, as the hook runs it."""

    def compactor(messages: list[SessionMessage], archive: Path | None) -> tuple[CompactResult, dict[str, str]]:
        options = CompactOptions(
            archive_dir=str(archive) if archive is not None else None,
            window_tokens=window_filled(messages, fill_percent),
            preserve_recent_messages=in_flight_preserve(messages, CompactOptions().preserve_recent_messages),
        )
        result = run_sync(compact_to_fit(messages, LocalJudge(), options), waits=False)
        if result.archive:
            write_archive(result.archive)
        return result, dict(result.archive)

    return compactor


@dataclass(frozen=True)
class FilledPrefix:
    """One prefix compacted in a window it fills (:func:`compact_in_window`): the window, where
    the context ended, in % of it, and what the pipeline and foresight lost there."""

    window: int  # tokens
    after: float  # the context after the pass
    in_flight: float  # ... of it, the last prompt and the turn in flight (turn_eviction.in_flight_chars)
    # the least the ladder could bring it to, a note for what precedes the turn in flight counted
    # (turn_eviction.least_chars)
    floor: float
    reused: int  # the prefix's outputs reused afterwards (the pipeline's outcome)
    gone: int  # ... of which gone
    recoverable: int  # ... of which a marker's file holds
    foresight_gone: int  # the reused outputs a policy with foresight loses in the same window (foresight.py)


@dataclass(frozen=True)
class _Point:
    """One compacted prefix, kept for the frontier (which needs the held-out scores first)."""

    group: str
    fraction: float
    fire: int
    head: list[SessionMessage]
    pairing: Pairing
    originals: dict[str, str]
    labels: dict[str, OutputLabel]
    before: int


@dataclass
class Evaluation:
    fractions: tuple[float, ...]
    sessions: int = 0
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # policy -> totals
    by_fraction: dict[str, dict[str, Outcome]] = field(default_factory=dict)  # "0.4" -> policy -> totals
    by_split: dict[str, dict[str, Outcome]] = field(default_factory=dict)  # corpus.SPLITS -> policy -> totals
    scores: Scores = field(default_factory=Scores)
    rows: list[Row] = field(default_factory=list)  # the ranked calls, in the order of ``scores``
    lossless_points: int = 0  # (session, fire point) pairs where the pipeline lost nothing
    points: int = 0
    frontier: dict[str, Outcome] = field(default_factory=dict)  # rank-and-cut policy -> totals
    frontier_ranker: str = ""  # which judge scores ranked the frontier's "judge" policies
    jev: JevFigures | None = None  # the same compactions through a Jev endpoint (through_jev.py)
    by_session: dict[str, Outcome] = field(default_factory=dict)  # session id -> the pipeline's totals
    origins: dict[str, tuple[str, str]] = field(default_factory=dict)  # session id -> (source, project)
    cut: list[CutOutput] = field(default_factory=list)  # every output the pipeline cut (robustness.py)
    fill_percent: float | None = None  # each prefix compacted in a window it fills this much (compact_in_window)
    filled: list[FilledPrefix] = field(default_factory=list)  # ... and how each ended there

    def aucs(self) -> dict[str, float | None]:
        return {name: auc(values, self.scores.labels) for name, values in self.scores.by_ranker.items()}


def evaluate(
    sessions: Sequence[Session],
    model: JudgeModel,
    fractions: Sequence[float] = EVAL_FIRE_POINTS,
    compactor: Compactor = compact_at_defaults,
    archive: Path | None = None,
    frontier: bool = False,
    progress: Callable[[str], None] | None = None,
    jev: JevFigures | None = None,
    fill_percent: float | None = None,
) -> Evaluation:
    """Measure the pipeline and the baselines; with ``frontier``, the rank-and-cut policies too;
    with ``jev``, the pipeline through its Jev endpoint as well (in one state and windowed),
    added to it.

    ``progress`` hears "session N/M" as each session starts (the CLI's progress line); with
    ``fill_percent``, the pipeline compacts each prefix in a window it fills that much
    (:func:`compact_in_window`) and the share of the window left after each pass is kept."""
    report = Evaluation(fractions=tuple(fractions), sessions=len(sessions), jev=jev, fill_percent=fill_percent)
    if fill_percent is not None:
        compactor = compact_in_window(fill_percent)
    points: list[_Point] = []
    policies = (PIPELINE, *BASELINES)
    for policy in policies:
        report.outcomes[policy] = Outcome()
    preserve = CompactOptions().preserve_recent_messages
    for number, session in enumerate(sessions):
        if progress is not None:
            progress(f"eval: session {number + 1}/{len(sessions)}")
        messages = session.messages
        labels = label_outputs(messages)
        report.origins[session.session_id] = (session.source, session.project)
        per_session = report.by_session.setdefault(session.session_id, Outcome())
        for fraction in fractions:
            fire = fire_index(len(messages), fraction)
            head = list(messages[:fire])
            pairing = pair_tool_calls(head, preserve)
            originals = original_results(head, pairing)
            before = result_chars(head)
            folder = archive / f"{number:03d}-{fraction:.1f}" if archive is not None else None
            result, archived = compactor(head, folder)
            contexts = {PIPELINE: result.messages}
            contexts.update({name: rule(head, pairing) for name, rule in BASELINES.items()})
            per_fraction = report.by_fraction.setdefault(f"{fraction:.1f}", {p: Outcome() for p in policies})
            measured: dict[str, Outcome] = {}
            gone: list[str] = []
            per_split = report.by_split.setdefault(session_split(session.session_id), {p: Outcome() for p in policies})
            for policy, kept in contexts.items():
                outcome = measured[policy] = measure(pairing.calls, originals, labels, fire, Context.of(kept), before,
                                                     archived, gone if policy == PIPELINE else None)
                report.outcomes[policy].add(outcome)
                per_fraction[policy].add(outcome)
                per_split[policy].add(outcome)
                if policy == PIPELINE:
                    per_session.add(outcome)
                    report.points += 1
                    report.lossless_points += 1 if outcome.gone == 0 else 0
            if fill_percent is not None:
                report.filled.append(_filled(head, result, labels, fill_percent, folder, measured[PIPELINE]))

            if frontier:
                points.append(_Point(session.group, fraction, fire, head, pairing, originals, labels, before))
            decided = {d.tool_use_id: d for d in result.decisions}
            goal = goal_from_messages(head)
            features = call_features(head, pairing, goal, build_reuse_index(head))
            if report.jev is not None:
                from_messages = {c.tool_use_id: model.keep_result(features[c.tool_use_id]) for c in pairing.candidates}
                add_point(report.jev, JevPoint(session.group, session.session_id, fraction, head, pairing, goal, originals, labels, fire,
                                               before, measured[PIPELINE], from_messages), model, folder)
            for call in pairing.candidates:
                values = features[call.tool_use_id]
                needed = labels[call.tool_use_id].needed_after(fire)
                since = fire - 1 - call.result_index
                decision = decided.get(call.tool_use_id)
                if decision is not None and decision.action != KEEP:
                    report.cut.append(CutOutput(
                        session.session_id, fraction, call.tool_use_id, call.tool, call.result_chars, since,
                        decision.reason, needed, call.tool_use_id in gone, values["edited_unread"] > 0, values["target_mentioned_later"] > 0,
                        is_recent(call, fire), call.is_error,
                    ))
                report.rows.append(
                    Row(session.group, fraction, call.tool_use_id, tuple(feature_vector(values)), needed,
                        call.result_chars, since)
                )
                report.scores.add(
                    needed,
                    {
                        SHIPPED: model.keep_result(values),
                        DECIDED: decision.keep_result if decision is not None else 1.0,
                        "size": float(call.result_chars),
                        "recency": -float(since),
                    },
                )
    held_out = held_out_scores(report.rows)
    if held_out is not None:
        report.scores.by_ranker[HELD_OUT] = held_out
    if report.jev is not None:
        # the jev rows are the same calls in the same order, their features read from states
        state_held_out = held_out_scores(report.jev.rows, STATE_FITTED_FEATURES)
        if held_out is not None and state_held_out is not None:
            report.jev.scores.by_ranker[HELD_OUT_MESSAGES] = held_out
            report.jev.scores.by_ranker[HELD_OUT_STATE] = state_held_out
    if frontier:
        report.frontier_ranker = HELD_OUT if held_out is not None else SHIPPED
        judge = dict(
            zip(((r.group, r.fraction, r.tool_use_id) for r in report.rows), report.scores.by_ranker[report.frontier_ranker])
        )
        for cut in FRONTIER:
            report.frontier[cut.name] = total = Outcome()
            for point in points:

                def keep_result(call: ToolCall, p: _Point = point) -> float:
                    return judge[(p.group, p.fraction, call.tool_use_id)]

                kept = cut_by_policy(point.head, point.pairing, point.originals, keep_result, cut)
                total.add(
                    measure(point.pairing.calls, point.originals, point.labels, point.fire, Context.of(kept), point.before)
                )
    return report


def held_out_scores(rows: Sequence[Row], features: Sequence[str] = FITTED_FEATURES) -> list[float] | None:
    """Every row scored by a model of the shipped ``features`` (the state judge's:
    ``state_fit.STATE_FITTED_FEATURES``) fitted on the other sessions' rows (``None`` when no
    fold can be fitted: fewer than three sessions, or a class missing once a session is left out)."""
    rows = projected(rows, features)
    groups = sorted({row.group for row in rows})
    if len(groups) < 3:
        return None
    for group in groups:
        rest = [row.label for row in rows if row.group != group]
        if all(rest) or not any(rest):
            return None
    return leave_one_session_out(rows, fit_logistic(rows))
