"""The evaluation's results as a text table, a JSON document and the docs/quality.md page."""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict
from typing import Any, Mapping, Sequence

from ..options import DEFAULT_TARGET_PERCENT
from ..stats import percent
from .corpus import SPLITS
from .fit import FitReport
from .foresight import DEFINITION as FORESIGHT
from .metrics import auc, ratio
from .outcome import MARKER_HOPS, Outcome, Scores
from .quality import HELD_OUT, PIPELINE, RANKERS, Evaluation, FilledPrefix
from .robustness import (
    FOLDS,
    LEVEL,
    RESAMPLES,
    CutOutput,
    Fold,
    Interval,
    bootstrap,
    folds,
    gone_share,
    removed_share,
    signal_rows,
)
from .through_jev import JevFigures

REGENERATE = "fast-jev eval --markdown docs/quality.md"
REGENERATE_FRONTIER = "fast-jev eval --frontier --markdown docs/quality.md"
REFIT = "fast-jev eval --fit --fit-report docs/judge-fit.md"
REFIT_STATE = "fast-jev eval --fit-state --fit-report docs/judge-state-fit.md"
FEATURES_SOURCE = "the prefix alone (`judge/features.py`)"
STATE_FEATURES_SOURCE = (
    "the Jev states the compaction would send for the prefix, at the default budgets, every candidate asked "
    "(`judge/state_features.py`: notes, inputs, digests and the texts around each call, not the outputs)"
)
_EMPTY = "n/a"


def _pct(value: float | None) -> str:
    return percent(value) if value is not None else _EMPTY


def _auc(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else _EMPTY


def outcome_figures(outcome: Outcome) -> dict[str, Any]:
    removed = outcome.result_chars_before - outcome.result_chars_after
    return {
        **asdict(outcome),
        "gone_share": ratio(outcome.gone, outcome.reused),
        "recoverable_share": ratio(outcome.recoverable, outcome.gone),
        "whole_share": ratio(outcome.whole, outcome.reused),
        "removed_share": ratio(removed, outcome.result_chars_before),
        "unpinned_removed_share": ratio(
            outcome.unpinned_chars_before - outcome.unpinned_chars_after, outcome.unpinned_chars_before
        ),
    }


def loso_line(fit: Mapping[str, Any]) -> str:
    if not fit or fit.get("loso_auc") is None:
        return "no fit recorded in the weights file."
    return (
        f"leave-one-session-out AUC {_auc(fit['loso_auc'])} over {fit['rows']} calls "
        f"({fit['positives']} reused) from {fit['sessions']} sessions; on the same calls output size "
        f"alone {_auc(fit.get('size_auc'))}, recency alone {_auc(fit.get('recency_auc'))}."
    )


def to_json(evaluation: Evaluation, fit: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "sessions": evaluation.sessions,
        "fire_points": list(evaluation.fractions),
        "points": evaluation.points,
        "lossless_points": evaluation.lossless_points,
        "windowed": windowed_figures(evaluation) if evaluation.fill_percent is not None else None,
        "policies": {name: outcome_figures(o) for name, o in evaluation.outcomes.items()},
        "by_fire_point": {
            fraction: {name: outcome_figures(o) for name, o in policies.items()}
            for fraction, policies in evaluation.by_fraction.items()
        },
        "by_split": {
            half: {name: outcome_figures(o) for name, o in policies.items()}
            for half, policies in evaluation.by_split.items()
        },
        "ranking": {
            "calls": len(evaluation.scores.labels),
            "reused": sum(evaluation.scores.labels),
            "auc": evaluation.aucs(),
        },
        "robustness": _robustness_json(evaluation),
        "fit": dict(fit),
        "jev": _jev_json(evaluation.jev) if evaluation.jev is not None else None,
        "frontier": {
            "ranker": evaluation.frontier_ranker,
            "policies": {name: outcome_figures(o) for name, o in evaluation.frontier.items()},
        }
        if evaluation.frontier
        else None,
    }


def _robustness_json(evaluation: Evaluation) -> dict[str, Any]:
    gone, removed = bootstrap(evaluation.by_session)
    return {
        "folds": [
            {"scheme": f.scheme, "name": f.name, "sessions": f.sessions, **outcome_figures(f.outcome)}
            for f in folds(evaluation.by_session, evaluation.origins)
        ],
        "bootstrap": {"resamples": RESAMPLES, "level": LEVEL, "gone_share": asdict(gone),
                      "unpinned_removed_share": asdict(removed)},
        "jev_one_state": _jev_bootstrap(evaluation),
        "signals": [asdict(row) for row in signal_rows(evaluation.cut)],
        "lost": [asdict(c) for c in evaluation.cut if c.gone],
    }


def _jev_bootstrap(evaluation: Evaluation) -> dict[str, Any] | None:
    if evaluation.jev is None:
        return None
    gone, removed = bootstrap(evaluation.jev.by_session)
    return {"gone_share": asdict(gone), "unpinned_removed_share": asdict(removed)}


def _outcome_rows(outcomes: Mapping[str, Outcome]) -> list[list[str]]:
    rows = []
    for name, outcome in outcomes.items():
        f = outcome_figures(outcome)
        rows.append(
            [
                name,
                str(outcome.reused),
                _pct(f["gone_share"]),
                _pct(f["recoverable_share"]),
                _pct(f["whole_share"]),
                _pct(f["removed_share"]),
                _pct(f["unpinned_removed_share"]),
            ]
        )
    return rows


_OUTCOME_HEAD = [
    "policy",
    "reused outputs",
    "gone",
    "recoverable (of gone)",
    "kept whole",
    "result chars removed",
    "of unpinned",
]


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [line(head), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _md_table(head: list[str], rows: list[list[str]], labels: int = 1) -> list[str]:
    """A Markdown table whose first ``labels`` columns are text, the rest figures."""
    align = ["---"] * labels + ["---:"] * (len(head) - labels)
    return ["| " + " | ".join(r) + " |" for r in [head, align, *rows]]


def _ranking_rows(evaluation: Evaluation) -> list[list[str]]:
    aucs = evaluation.aucs()
    return [[name, _auc(aucs.get(name))] for name in RANKERS]


def _ranking_note(evaluation: Evaluation) -> list[str]:
    """Why a figure is n/a, when one is."""
    aucs = evaluation.aucs()
    notes = []
    if HELD_OUT not in aucs:
        notes.append(
            "held out n/a: refitting needs at least three sessions, and reused and unreused calls "
            "whichever session is left out"
        )
    if any(value is None for value in aucs.values()):
        notes.append("n/a: an AUC needs both reused and unreused calls")
    return notes


def _summary(evaluation: Evaluation) -> str:
    pipeline = evaluation.outcomes.get(PIPELINE, Outcome())
    points = ", ".join(f"{int(f * 100)} %" for f in evaluation.fractions)
    sessions = f"{evaluation.sessions} session{'s' if evaluation.sessions != 1 else ''}"
    text = (
        f"{sessions}, fire points at {points} of each ({evaluation.points} compactions); "
        f"{pipeline.present} outputs present at the fire points, {pipeline.reused} of them reused afterwards "
        f"({pipeline.reproducible} reproducible by a re-read or an identical re-run). "
        f"The pipeline lost nothing at {evaluation.lossless_points} of {evaluation.points} fire points"
    )
    if pipeline.gone:
        text += f"; {pipeline.gone_partly} of its {pipeline.gone} gone outputs keep part of what was reused"
    return text + "." + _windowed_line(evaluation)


def _windowed_line(evaluation: Evaluation) -> str:
    """How the prefixes ended in a window they filled to ``fill_percent``, when they were given one."""
    if evaluation.fill_percent is None:
        return ""
    figures = windowed_figures(evaluation)
    return (
        f" Each prefix was compacted in a window it fills to {evaluation.fill_percent:g} % with a "
        f"{DEFAULT_TARGET_PERCENT:g} % target: {figures['over_target']} of {figures['points']} end over the "
        f"target, {figures['unreachable']} of them unreachable (the last prompt and the turn in flight alone "
        f"are over it), {figures['note_bound']} more with the note for the conversation before it counted, "
        f"{figures['reachable_over']} reachable "
        f"(after the pass, median {_pct_of_window(figures['after_median'])}, "
        f"max {_pct_of_window(figures['after_max'])} of the window); a policy that knew every later reuse "
        f"would lose {figures['foresight_gone']} of the reused outputs there (*gone with foresight*)."
    )


def _pct_of_window(value: float | None) -> str:
    return _pct(value / 100) if value is not None else _EMPTY


# The window sizes the prefix fills are reported by, in tokens: a prefix of a few messages gets a
# window of a few hundred tokens, where no cut frees more than its marker costs; real sessions run
# in windows of 200k tokens (the replay's smallest is 32k).
WINDOW_BANDS: tuple[tuple[int, int | None], ...] = ((0, 8_000), (8_000, 32_000), (32_000, 200_000), (200_000, None))


def band_name(low: int, high: int | None) -> str:
    if high is None:
        return f"{low:,} or more"
    return f"under {high:,}" if low == 0 else f"{low:,} to {high - 1:,}"


def windowed_figures(evaluation: Evaluation) -> dict[str, Any]:
    """How the prefixes ended in a window they filled, all of them and by the window's size."""
    return {
        "fill_percent": evaluation.fill_percent,
        "target_percent": DEFAULT_TARGET_PERCENT,
        **_filled_figures(evaluation.filled),
        "by_window": [
            {"window_tokens": band_name(low, high),
             **_filled_figures([p for p in evaluation.filled if low <= p.window and (high is None or p.window < high)])}
            for low, high in WINDOW_BANDS
        ],
    }


def _filled_figures(filled: Sequence[FilledPrefix]) -> dict[str, Any]:
    target = DEFAULT_TARGET_PERCENT
    over = [p for p in filled if p.after > target]
    reused = sum(p.reused for p in filled)
    gone = sum(p.gone for p in filled)
    return {
        "points": len(filled),
        "over_target": len(over),
        "unreachable": sum(1 for p in over if p.in_flight > target),
        # Over the target with the turn in flight under it, but over it once the one note that would
        # stand for the conversation before it is counted (turn_eviction.least_chars): no cut that
        # keeps a marker brings these under.
        "note_bound": sum(1 for p in over if p.in_flight <= target < p.floor),
        "reachable_over": sum(1 for p in over if p.floor <= target),
        "reused": reused,
        "gone": gone,
        "gone_share": ratio(gone, reused),
        "recoverable_share": ratio(sum(p.recoverable for p in filled), gone),
        "after_median": statistics.median(p.after for p in filled) if filled else None,
        "after_max": max((p.after for p in filled), default=None),
        "foresight_gone": sum(p.foresight_gone for p in filled),
    }


PREFIX_FILLS_START = "<!-- prefix-fills: generated by fast-jev eval --prefix-fills -->"
PREFIX_FILLS_END = "<!-- /prefix-fills -->"
_PREFIX_FILLS = re.compile(re.escape(PREFIX_FILLS_START) + r".*?" + re.escape(PREFIX_FILLS_END) + r"\n*", re.DOTALL)
_PREFIX_FILLS_HEAD = [
    "window (tokens)", "fill", "target", "prefixes", "over target", "unreachable", "note-bound", "reachable, over",
    "reused outputs", "gone", "gone with foresight", "recoverable (of gone)", "context after (median)", "(max)",
]


def prefix_fills_section(evaluation: Evaluation) -> str:
    """The page's section for a ``--prefix-fills`` run: how the prefixes ended in a window they
    filled, and what the pipeline lost there, all and by the window's size; ``fast-jev eval
    --prefix-fills N --markdown FILE`` writes it alone (:func:`with_prefix_fills`)."""
    figures = windowed_figures(evaluation)
    fill = f"{evaluation.fill_percent:g}"

    def row(name: str, f: Mapping[str, Any]) -> list[str]:
        return [
            name, f"{fill} %", f"{DEFAULT_TARGET_PERCENT:g} %", str(f["points"]), str(f["over_target"]),
            str(f["unreachable"]), str(f["note_bound"]), str(f["reachable_over"]), str(f["reused"]),
            f"{f['gone']} ({_pct(f['gone_share'])})",
            f"{f['foresight_gone']} ({_pct(ratio(f['foresight_gone'], f['reused']))})",
            _pct(f["recoverable_share"]),
            _pct_of_window(f["after_median"]), _pct_of_window(f["after_max"]),
        ]

    rows = [row("all", figures), *(row(band["window_tokens"], band) for band in figures["by_window"])]
    lines = [
        PREFIX_FILLS_START,
        "## Prefixes in a window they fill",
        "",
        f"Generated by `fast-jev eval --prefix-fills {fill} --markdown docs/quality.md`. Each fire point's prefix "
        f"({evaluation.sessions} sessions) compacted down the eviction ladder in a window it fills to {fill} %, "
        f"with the {DEFAULT_TARGET_PERCENT:g} % target; the rows below the first split them by that window's "
        "size (a prefix of a few messages gets a window of a few hundred tokens, where no cut frees more than "
        "its marker costs; Claude Code's usual window is 200,000 tokens). *Unreachable*: over the target with the "
        "last prompt and the turn in flight alone over it (the user's last prompt and the turn's last exchange "
        "stay whole); *note-bound*: over it once the one note that would stand for the conversation before the "
        "turn in flight is counted (a cut that frees less than its marker costs is not taken); *reachable, "
        "over*: the rest of those over the target. *Gone*, *recoverable*: the reused outputs, as in the fire "
        f"points below; {FORESIGHT}.",
        "",
        *_md_table(_PREFIX_FILLS_HEAD, rows),
        PREFIX_FILLS_END,
    ]
    return "\n".join(lines)


def prefix_fills_of(page: str) -> str | None:
    """The ``--prefix-fills`` section of a page, if it holds one."""
    found = _PREFIX_FILLS.search(page)
    return found.group(0).rstrip("\n") if found else None


def with_prefix_fills(page: str, section: str) -> str:
    """``page`` with its ``--prefix-fills`` section replaced by ``section``, or ``section`` put
    before the page's fire points (after the replay's section) when it holds none."""
    if _PREFIX_FILLS.search(page):
        return _PREFIX_FILLS.sub(lambda _: section + "\n\n", page, count=1)
    head, sep, rest = page.partition("\n## Fire points")
    if not sep:
        return page.rstrip("\n") + "\n\n" + section + "\n"
    return head.rstrip("\n") + "\n\n" + section + "\n\n## Fire points" + rest


def text_report(evaluation: Evaluation, fit: Mapping[str, Any]) -> str:
    if not evaluation.points:
        return "No session with a completed tool call: nothing to evaluate."
    lines = [_summary(evaluation), ""]
    lines += _table(_OUTCOME_HEAD, _outcome_rows(evaluation.outcomes))
    lines += ["", robustness_line(evaluation)]
    lines += ["", f"Ranking of the {len(evaluation.scores.labels)} unpinned calls present at the fire points "
              f"({sum(evaluation.scores.labels)} reused afterwards), AUC:"]
    lines += _table(["ranker", "AUC"], _ranking_rows(evaluation))
    lines += _ranking_note(evaluation)
    lines += ["", f"Shipped weights' fit: {loso_line(fit)}"]
    if evaluation.frontier:
        lines += ["", _frontier_intro(evaluation)]
        lines += _table(_OUTCOME_HEAD, _outcome_rows(evaluation.frontier))
    if evaluation.jev is not None:
        jev = evaluation.jev
        lines += ["", _jev_intro(jev)]
        lines += _table(_OUTCOME_HEAD, _outcome_rows(jev.outcomes))
        lines += _table(["ranker (same calls)", "AUC"], _score_rows(jev.scores))
        lines += ["", f"Windowed states: {_windowed_intro(jev)}"]
        if jev.windowed_points:
            lines += _table(_OUTCOME_HEAD, _outcome_rows(jev.windowed_outcomes))
            lines += _table(["ranker (same calls)", "AUC"], _score_rows(jev.windowed_scores))
    return "\n".join(lines)


def _split_intro() -> str:
    return (
        "By half of the sessions (`evaluation/corpus.py` splits them by a hash of each session's id, its "
        "subagents with it): the defaults were chosen on the *tune* half of an earlier split by file name, "
        "which set subagent transcripts apart from their sessions; the halves differ from it, so *check* "
        "is not wholly unseen by the choice."
    )


def _split_rows(evaluation: Evaluation) -> list[list[str]]:
    rows = []
    for half in SPLITS:
        policies = evaluation.by_split.get(half)
        if policies is None:
            continue
        for row in _outcome_rows({name: policies[name] for name in policies if name != "keep everything"}):
            rows.append([half, *row])
    return rows


def _interval(interval: Interval) -> str:
    return f"{_pct(interval.low)} to {_pct(interval.high)}"


def _fold_row(fold: Fold) -> list[str]:
    return [
        fold.scheme,
        fold.name.rsplit("/", 1)[-1],
        str(fold.sessions),
        str(fold.outcome.reused),
        str(fold.outcome.gone),
        _pct(gone_share(fold.outcome)),
        _pct(removed_share(fold.outcome)),
    ]


def _signs(cut: CutOutput) -> list[str]:
    return [name for name, on in (("edited since", cut.edited_since), ("named since", cut.named_since),
                                  ("recent", cut.recent), ("error", cut.error)) if on]


def _spread(by_session: Mapping[str, Outcome], origins: Mapping[str, tuple[str, str]]) -> str:
    """The gone share over the hashed folds, lowest to highest, and its bootstrap interval."""
    shares = [s for f in folds(by_session, origins) if f.scheme == "fold" and (s := gone_share(f.outcome)) is not None]
    gone, _ = bootstrap(by_session)
    spread = f"{_pct(min(shares))} to {_pct(max(shares))}" if shares else _EMPTY
    return (f"the gone share runs from {spread} over {FOLDS} folds; the central {int(LEVEL * 100)} % of a "
            f"bootstrap over sessions from {_interval(gone)}")


def robustness_line(evaluation: Evaluation) -> str:
    """The variance in one line, for the text report."""
    return f"Across sessions: {_spread(evaluation.by_session, evaluation.origins)} (--markdown shows every part)."


def robustness_markdown(evaluation: Evaluation) -> list[str]:
    """The pipeline's figures per source, project and fold, a bootstrap interval, and the signs
    the cut and the lost outputs carry (evaluation/robustness.py)."""
    every = folds(evaluation.by_session, evaluation.origins)
    shown = [f for f in every if f.outcome.reused]
    gone, removed = bootstrap(evaluation.by_session)
    lines = [
        "## Variance across sessions",
        "",
        f"The pipeline at its defaults over parts of the same sessions: each source (a published collection), "
        f"each project (a folder of sessions) and {FOLDS} folds of sessions drawn by a hash of their session ids; "
        "each row is what a leave-it-out would measure on the part held out (a session's subagents count with "
        "it). The policy's numbers were chosen on the *tune* half and the judge's weights fitted on all the "
        "sessions, so these are not blind tests. "
        f"{len(every) - len(shown)} parts without a reused output are left out.",
        "",
    ]
    lines += _md_table(["part", "name", "sessions", "reused outputs", "gone", "gone share", "of unpinned removed"],
                       [_fold_row(f) for f in shown], labels=2)
    lines += [
        "",
        f"Sessions drawn with replacement {RESAMPLES:,} times: the central {int(LEVEL * 100)} % of the gone "
        f"share runs from {_interval(gone)}, of the unpinned removed share from {_interval(removed)}.",
        "",
    ]
    if evaluation.jev is not None:
        jev_removed = bootstrap(evaluation.jev.by_session)[1]
        lines += [
            f"Through Jev (one state, the same fire points): {_spread(evaluation.jev.by_session, evaluation.origins)}, "
            f"of the unpinned removed share from {_interval(jev_removed)}.",
            "",
        ]
    lines += [
        "The outputs the pipeline cut, by the signs each carried at the compaction (an output may carry "
        "several). A sign worth protecting loses more of what it marks than the cut outputs do overall; "
        "*share of cut chars*: the characters those outputs held before the cut.",
        "",
    ]
    total_chars = sum(c.chars for c in evaluation.cut)
    lines += _md_table(
        ["sign", "cut outputs", "reused", "gone", "gone of cut", "share of cut chars"],
        [
            [r.name, str(r.cut), str(r.reused), str(r.gone), _pct(ratio(r.gone, r.cut)), _pct(ratio(r.chars, total_chars))]
            for r in signal_rows(evaluation.cut)
        ],
    )
    lost = [c for c in evaluation.cut if c.gone]
    if lost:
        distinct = {(c.session_id, c.tool_use_id) for c in lost}
        lines += ["", f"The gone outputs ({len(lost)} at the fire points: {len(distinct)} distinct outputs of "
                  f"{len({c.session_id for c in lost})} of {len(evaluation.by_session)} sessions):", ""]
        lines += _md_table(
            ["session", "fire point", "tool", "decided by", "signs", "chars", "messages before the fire point"],
            [
                [
                    c.session_id[:13],
                    f"{int(c.fraction * 100)} %",
                    c.tool,
                    c.reason,
                    ", ".join(_signs(c)) or "none",
                    f"{c.chars:,}",
                    str(c.since),
                ]
                for c in lost
            ],
            labels=5,
        )
    return [*lines, ""]


def _frontier_intro(evaluation: Evaluation) -> str:
    return (
        "Cut policies over the same prefixes: unpinned results cut to a digest when the judge's keep_result "
        f"({evaluation.frontier_ranker}) per 10,000 characters freed is under a price, or when longer than a "
        "length; nothing is saved, so nothing is recoverable."
    )


def markdown_report(evaluation: Evaluation, fit: Mapping[str, Any]) -> str:
    command = REGENERATE_FRONTIER if evaluation.frontier else REGENERATE
    if evaluation.jev is not None:
        command = command.replace(" --markdown", f" {evaluation.jev.flag} --markdown")
    if evaluation.fill_percent is not None:
        command = command.replace(" --markdown", f" --prefix-fills {evaluation.fill_percent:g} --markdown")
    lines = [
        "# Quality",
        "",
        f"Generated by `{command}` (add paths to evaluate other transcripts; "
        f"`{REFIT}{command.removeprefix('fast-jev eval')}` refits the judge first). Do not edit by hand.",
        "",
    ]
    if not evaluation.points:
        return "\n".join(lines + ["No session with a completed tool call: nothing to evaluate.", ""])
    lines += ["## Fire points", "", _summary(evaluation), "", "## Post-fire loss and reduction", ""]
    lines += _md_table(_OUTCOME_HEAD, _outcome_rows(evaluation.outcomes))
    lines += ["", "By fire point (the pipeline at its defaults):", ""]
    lines += _md_table(
        ["fire point", *_OUTCOME_HEAD[1:]],
        [
            [f"{int(float(fraction) * 100)} %", *_outcome_rows({PIPELINE: policies[PIPELINE]})[0][1:]]
            for fraction, policies in evaluation.by_fraction.items()
        ],
    )
    lines += ["", _split_intro(), ""]
    lines += _md_table(["sessions", *_OUTCOME_HEAD], _split_rows(evaluation), labels=2)
    lines += ["", *robustness_markdown(evaluation)]
    lines += ["## Ranking", ""]
    lines += [
        f"AUC of each ranking of the {len(evaluation.scores.labels)} unpinned calls present at the fire points "
        f"({sum(evaluation.scores.labels)} reused afterwards). *Held out*: the judge's model refitted in this "
        "run, leave-one-session-out (each session scored by a fit without it). *Shipped weights*: "
        "`judge/weights.json`, fitted on the corpus, so in-sample when these are corpus sessions. "
        "*The pass's decisions*: the keep_result each call's decision carried in the default pass, the "
        "judge's score where it scored the call and a rule's 0 or 1 where a rule settled it (a call kept "
        "for its size unasked counts 1), so the rules' ties rank it below the judge alone.",
        "",
    ]
    lines += _md_table(["ranker", "AUC"], _ranking_rows(evaluation))
    lines += ["", *_ranking_note(evaluation)] if _ranking_note(evaluation) else []
    lines += ["", f"The shipped weights' own fit: {loso_line(fit)}", ""]
    if evaluation.frontier:
        lines += ["## Frontier", "", _frontier_intro(evaluation), ""]
        lines += _md_table(_OUTCOME_HEAD, _outcome_rows(evaluation.frontier))
        lines += [""]
    if evaluation.jev is not None:
        lines += jev_markdown(evaluation.jev)
    lines += ["## Definitions", ""]
    lines += [
        "- **Fire point**: the session is cut at 40, 60 and 80 % of its messages; the prefix is compacted "
        "as a user would (`compact()` with the embedded judge at default options), the suffix is what "
        "happened next.",
        "- **Reused output**: an output present at the fire point one of whose distinctive 8-word shingles, "
        "or ids/hashes/paths of 24+ characters, appears after the fire point in assistant text or in a tool "
        "input (kompact's behavioural label). *Reproducible*: the session later re-read the same target or "
        "re-ran the identical call.",
        "- **Gone**: a reused output that is neither kept whole nor has every snippet reused after the fire "
        "point still somewhere in the compacted context (a truncated head, a quote, a re-read).",
        "- **Recoverable**: a gone output whose whole text is in a file named by a marker in the compacted "
        "context (`saved at <path>`, `saved to <path>`, `full output: <path>`), or by a marker in such a "
        f"file, up to {MARKER_HOPS} files deep (an evicted turn's file keeps its digests' markers).",
        "- **Result chars removed**: the share of tool-result characters of the prefix that the compacted "
        "prefix no longer holds; pinned calls (the first message and the last 6) count in the total. "
        "*Of unpinned*: the same share over the calls a compaction may touch.",
        "- Baselines use the same pinned calls: *cut results over 8,000 chars* keeps the first 300 characters "
        "of each longer result; *drop everything* removes every unpinned call and its result.",
        "",
    ]
    return "\n".join(lines)


def fit_markdown(report: FitReport, feature_names: tuple[str, ...], weights_path: str, command: str = REFIT,
                 features_from: str = FEATURES_SOURCE,
                 unfitted_from: str = "`UNFITTED_GROUPS` in `evaluation/fit.py`") -> str:
    lines = [
        "# Judge fit" if command == REFIT else "# Judge fit over Jev states",
        "",
        f"Generated by `{command}`; the weights are in `{weights_path}`. Do not edit by hand.",
        "",
        f"{report.rows} rows (unpinned calls present at fire points "
        f"{', '.join(report.loso_by_fraction)} of each session; {report.positives} reused afterwards) "
        f"from {report.sessions} sessions (a subagent transcript counts with its session).",
        "",
        "| ranking | AUC |",
        "|---|---:|",
        f"| fitted judge, leave-one-session-out | {_auc(report.loso_auc)} |",
        f"| output size alone | {_auc(report.size_auc)} |",
        f"| recency alone | {_auc(report.recency_auc)} |",
        f"| fitted judge, in-sample (not a test) | {_auc(report.in_sample_auc)} |",
        "",
        "Leave-one-session-out AUC by fire point:",
        "",
        "| fire point | AUC |",
        "|---|---:|",
        *(f"| {fraction} | {_auc(value)} |" for fraction, value in report.loso_by_fraction.items()),
        "",
        "Method: L2-regularised logistic regression (Newton's method, plain Python); every session's rows "
        "are predicted by a model fitted without them. Features come from "
        f"{features_from}; labels are kompact-style reuse after the fire point (`evaluation/labels.py`).",
        "",
        "| feature | weight |",
        "|---|---:|",
        f"| bias | {report.weights[0]:+.3f} |",
        *(f"| {name} | {w:+.3f} |" for name, w in zip(report.features, report.weights[1:])),
        "",
        f"Not fitted (weight 0; {unfitted_from} says why): "
        f"{', '.join(name for name in feature_names if name not in report.features) or 'none'}. "
        + (
            "The judge fitted without each source, scored on it: docs/quality.md, \"Judge transfer across sources\"."
            if command == REFIT
            else "The judge fitted without each source, scored on it: "
            + ", ".join(
                f"{fold.source} {_auc(fold.held_out_auc)} (output size alone {_auc(fold.size_auc)})"
                for fold in report.by_source
                if fold.held_out_auc is not None
            )
            + "."
        ),
        "",
    ]
    return "\n".join(lines)


def _score_rows(scores: Scores) -> list[list[str]]:
    return [[name, _auc(auc(values, scores.labels))] for name, values in scores.by_ranker.items()]


def _jev_intro(jev: JevFigures) -> str:
    return (
        f"The same {jev.points} fire points compacted at the default settings with the judge behind a Jev "
        f"endpoint (`fast-jev serve`): the fitted model reading the states the compaction sends (notes, inputs, "
        f"digests, the texts around each call; judge/state_features.py) instead of the messages, in "
        f"{jev.requests} requests. The rankings score the same calls over the messages with `judge/weights.json` "
        "and over the states with `judge/state_weights.json` (the same model fitted on what states carry), both "
        "fitted on the corpus, so in-sample here; *held out*: each session scored by a fit without it; "
        "*weights.json over the state*: the whole-output weights applied to the state's features."
    )


def _windowed_intro(jev: JevFigures) -> str:
    if not jev.windowed_points:
        return "No fire point could be windowed: each one's newest messages outweigh all its one-line calls."
    per = jev.windows / jev.windowed_points
    return (
        f"{jev.windowed_points} fire points compacted again through the endpoint with "
        "maxStateTokens at half of what their one-line state needs (raised a quarter at a time until their newest "
        "messages and a window fit), so their candidates are split into windows "
        f"({jev.windows} windows, {per:.1f} per compaction, {jev.windowed_requests} requests, "
        f"~{jev.windowed_tokens:,} estimated tokens); {jev.unwindowable_points} other fire points with candidates "
        "cannot be windowed (their newest messages outweigh all their one-line calls). Figures over those "
        f"{jev.windowed_points} fire points only:"
    )


def jev_markdown(jev: JevFigures) -> list[str]:
    """The "Through Jev" section of docs/quality.md."""
    lines = ["## Through Jev", "", _jev_intro(jev), ""]
    lines += _md_table(_OUTCOME_HEAD, _outcome_rows(jev.outcomes))
    lines += [""]
    lines += _md_table(["ranker (same calls)", "AUC"], _score_rows(jev.scores))
    lines += ["", "### Windowed states", "", _windowed_intro(jev), ""]
    if jev.windowed_points:
        lines += _md_table(_OUTCOME_HEAD, _outcome_rows(jev.windowed_outcomes))
        lines += [""]
        lines += _md_table(["ranker (same calls)", "AUC"], _score_rows(jev.windowed_scores))
        lines += [""]
    return lines


def _jev_json(jev: JevFigures) -> dict[str, Any]:
    def aucs(scores: Scores) -> dict[str, float | None]:
        return {name: auc(values, scores.labels) for name, values in scores.by_ranker.items()}

    return {
        "points": jev.points,
        "requests": jev.requests,
        "policies": {name: outcome_figures(o) for name, o in jev.outcomes.items()},
        "ranking": {"calls": len(jev.scores.labels), "reused": sum(jev.scores.labels), "auc": aucs(jev.scores)},
        "windowed": {
            "points": jev.windowed_points,
            "unwindowable_points": jev.unwindowable_points,
            "windows": jev.windows,
            "requests": jev.windowed_requests,
            "estimated_tokens": jev.windowed_tokens,
            "policies": {name: outcome_figures(o) for name, o in jev.windowed_outcomes.items()},
            "ranking": {
                "calls": len(jev.windowed_scores.labels),
                "reused": sum(jev.windowed_scores.labels),
                "auc": aucs(jev.windowed_scores),
            },
        },
    }
