"""``fast-jev eval``: the quality evaluation over transcripts, and the judge's fit (``--fit``)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .arguments import whole_number

if TYPE_CHECKING:
    from ..evaluation.corpus import Session, Skipped


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval",
        help="measure what compaction loses that the session reused later; fit the judge",
        description="Cut each session at 40/60/80 % of its messages, compact the prefix at default "
        "settings with the embedded judge, and report how many outputs reused after the cut are gone "
        "from the compacted context, how many are recoverable through a marker's saved file, how much "
        "tool output was removed, and how well each judge ranks the calls (AUC), beside fixed baselines. "
        "With --fit, first fit the judge's weights on the same transcripts (leave-one-session-out AUC).",
    )
    p.add_argument(
        "paths",
        nargs="*",
        help="transcript files or folders searched for *.jsonl (default: the shared corpus beside the repository)",
    )
    fit = p.add_mutually_exclusive_group()
    fit.add_argument("--fit", action="store_true", help="fit the judge on these transcripts and write the weights")
    fit.add_argument(
        "--fit-state",
        action="store_true",
        help="fit the judge that reads Jev states (`fast-jev serve`'s) on the features the states carry, and write "
             "its weights (default: the shipped judge/state_weights.json; --weights names another file)",
    )
    p.add_argument(
        "--weights",
        metavar="FILE",
        help="judge weights to score with, and to write with --fit (default: the shipped judge/weights.json)",
    )
    p.add_argument("--fit-report", metavar="FILE", help="with --fit, also write the fit's report (Markdown) here")
    p.add_argument("--no-eval", action="store_true", help="with --fit, stop after fitting")
    p.add_argument(
        "--archive",
        metavar="DIR",
        help="save the cut outputs under DIR, as the plugin does, so markers name a file (default: a temporary "
             "folder, removed afterwards)",
    )
    p.add_argument(
        "--frontier",
        action="store_true",
        help="also measure cut policies (judge price or result length, two digests): the frontier",
    )
    jev = p.add_mutually_exclusive_group()
    jev.add_argument(
        "--serve",
        action="store_true",
        help="also compact each fire point with the judge behind `fast-jev serve` (started on 127.0.0.1 for the "
             "run), in one state and in windowed states, and report both beside the in-process figures",
    )
    jev.add_argument("--jev-url", metavar="URL", help="the same as --serve, through the Jev endpoint at URL")
    p.add_argument(
        "--prefix-fills",
        metavar="PERCENT",
        type=_percent,
        help="compact each fire point's prefix in a window it fills to PERCENT (60: the plugin's trigger) with the "
             "40 %% target, and report how many prefixes end over the target",
    )
    p.add_argument(
        "--replay",
        action="store_true",
        help="replay each session message by message into a live context compacted at the plugin's trigger and "
             "the engine's, against each --window, and report passes, built-in summaries and reuses gone, per "
             "source and for each project's sessions back to back as one, instead of the fire points",
    )
    p.add_argument(
        "--window",
        dest="windows",
        metavar="TOKENS",
        type=_POSITIVE,
        action="append",
        help="with --replay, a context window to replay against (repeatable; default: 32000, 64000 and 200000)",
    )
    p.add_argument(
        "--overhead",
        metavar="TOKENS",
        type=_POSITIVE,
        default=0,
        help="with --replay, tokens of system prompt and tools counted in the live context besides the messages "
             "(default: none)",
    )
    p.add_argument(
        "--source",
        dest="sources",
        metavar="NAME",
        action="append",
        help="only the sessions of this source (the first folder under a path given: claude-code-log, spotter, "
             "entire-checkpoints, ...); repeatable",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    p.add_argument("--markdown", metavar="FILE", help="also write the results page (docs/quality.md) to FILE")
    p.set_defaults(run=run)


# A window or an overhead in tokens.
_POSITIVE = whole_number(1, "a number above 0")


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(f"expected a number above 0 and at most 100, got {text}")
    return value


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)  # repository files (weights, docs), not user data
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def run(args: argparse.Namespace) -> int:
    import sys
    import tempfile
    from contextlib import ExitStack

    from ..evaluation.corpus import default_corpus, load_sessions
    from ..evaluation.fit import FIT_FIRE_POINTS, FITTED_FEATURES, fit_report, fitted_model, session_rows
    from ..evaluation.quality import evaluate
    from ..evaluation.report import (
        REFIT_STATE,
        STATE_FEATURES_SOURCE,
        fit_markdown,
        markdown_report,
        prefix_fills_of,
        prefix_fills_section,
        text_report,
        to_json,
        with_prefix_fills,
    )
    from ..evaluation.state_fit import STATE_FITTED_FEATURES, state_rows
    from ..evaluation.through_jev import JevFigures, served_judge
    from ..evaluation.transfer_report import section_of as transfer_of
    from ..evaluation.transfer_report import transfer_section
    from ..evaluation.transfer_report import with_section as with_transfer
    from ..judge.features import FEATURE_NAMES
    from ..judge.model import STATE_WEIGHTS_PATH, WEIGHTS_PATH, ModelError, load_model, load_state_model
    from .progress import Progress

    paths = args.paths or [str(default_corpus())]
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        print(f"fast-jev eval: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    sessions, skipped = load_sessions(paths)
    if args.sources:
        sessions = [s for s in sessions if s.source in args.sources]
    if args.replay:
        if args.fit or args.fit_state or args.frontier or args.prefix_fills:
            print("fast-jev eval --replay: not with --fit, --fit-state, --frontier or --prefix-fills", file=sys.stderr)
            return 2
        return _replay(args, sessions, skipped)
    if args.windows or args.overhead:
        print("fast-jev eval: --window and --overhead go with --replay", file=sys.stderr)
        return 2
    weights_path = Path(args.weights) if args.weights else WEIGHTS_PATH

    state_weights_path = Path(args.weights) if args.weights and args.fit_state else STATE_WEIGHTS_PATH
    transfer: str | None = None  # the transfer section of docs/quality.md, from a fit of the embedded judge
    if args.fit or args.fit_state:
        rows_of = state_rows if args.fit_state else session_rows
        rows = [row for s in sessions for row in rows_of(s.messages, s.session_id, FIT_FIRE_POINTS, source=s.source)]
        groups = {row.group for row in rows}
        if len(groups) < 2 or not any(r.label for r in rows) or all(r.label for r in rows):
            print("fast-jev eval --fit: needs reused and unreused outputs in at least two sessions", file=sys.stderr)
            return 2
        report = fit_report(rows, features=STATE_FITTED_FEATURES if args.fit_state else FITTED_FEATURES)
        model = fitted_model(report, files=len(sessions))
        written = state_weights_path if args.fit_state else weights_path
        _write_text(written, json.dumps(model.to_json(), indent=1, sort_keys=True) + "\n")
        if args.fit_state:
            page = fit_markdown(report, FEATURE_NAMES, "src/fast_jev_compaction/judge/state_weights.json",
                                REFIT_STATE, STATE_FEATURES_SOURCE, "`STATE_UNFITTED_GROUPS` in `evaluation/state_fit.py`")
        else:
            page = fit_markdown(report, FEATURE_NAMES, "src/fast_jev_compaction/judge/weights.json")
        if args.fit_report:
            _write_text(Path(args.fit_report), page)
        if args.fit:
            transfer = transfer_section(report)
        if not args.json:
            print(page)
            if transfer is not None:
                print(transfer)
        if args.no_eval:
            if args.markdown and transfer is not None:
                _write_text(Path(args.markdown), with_transfer(_read_text(Path(args.markdown)), transfer))
            if args.json:
                print(json.dumps({"fit": dict(model.fit)}, indent=1))
            return 0

    try:
        model = load_model(weights_path if args.weights and not args.fit_state or args.fit else None)
        state_model = load_state_model(state_weights_path if args.fit_state else None)
    except ModelError as exc:
        print(f"fast-jev eval: {exc}", file=sys.stderr)
        return 2
    # Cut outputs are always archived, as the plugin archives them, so "recoverable" is measured.
    with ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="fast-jev-eval-"))
        jev = None
        if args.serve:
            jev = JevFigures(stack.enter_context(served_judge()), "--serve", state_model)
        elif args.jev_url:
            jev = JevFigures(args.jev_url, f"--jev-url {args.jev_url}", state_model)
        progress = stack.enter_context(Progress())
        evaluation = evaluate(
            sessions, model, archive=Path(args.archive or scratch), frontier=args.frontier, progress=progress.update,
            jev=jev, fill_percent=args.prefix_fills,
        )
    if args.markdown and args.prefix_fills:
        # A window changes every figure of the page: the run writes its own section alone.
        path = Path(args.markdown)
        _write_text(path, with_prefix_fills(_read_text(path), prefix_fills_section(evaluation)))
    elif args.markdown:
        from ..evaluation.replay_report import section_of, with_section

        page = markdown_report(evaluation, model.fit)
        before = _read_text(Path(args.markdown))
        # The replay's section, which its own run writes, leads the page and stays; so does the
        # judge's transfer, which a fit writes, at the end.
        kept = section_of(before)
        page = with_section(page, kept) if kept is not None else page
        # So does the --prefix-fills section, which its own run writes, after it.
        fills = prefix_fills_of(before)
        page = with_prefix_fills(page, fills) if fills is not None else page
        kept_transfer = transfer if transfer is not None else transfer_of(before)
        _write_text(Path(args.markdown), with_transfer(page, kept_transfer) if kept_transfer is not None else page)
    if args.json:
        document = to_json(evaluation, model.fit)
        document["skipped"] = [{"file": str(s.path), "reason": s.reason} for s in skipped]
        print(json.dumps(document, indent=1))
    else:
        print(text_report(evaluation, model.fit))
        if skipped:
            print(f"{len(skipped)} file(s) left out (unreadable, or no completed tool call); --json lists them")
    return 0


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _replay(args: argparse.Namespace, sessions: list[Session], skipped: list[Skipped]) -> int:
    from contextlib import ExitStack

    from ..evaluation.replay import REPLAY_WINDOWS, replay
    from ..evaluation.replay_report import markdown_section, text_report, to_json, with_section
    from ..evaluation.through_jev import served_judge
    from .progress import Progress

    windows = tuple(dict.fromkeys(args.windows)) if args.windows else REPLAY_WINDOWS
    with ExitStack() as stack:
        url = stack.enter_context(served_judge()) if args.serve else args.jev_url or ""
        progress = stack.enter_context(Progress())
        report = replay(sessions, windows, overhead_tokens=args.overhead, judge_url=url, progress=progress.update)
    if args.markdown:
        path = Path(args.markdown)
        _write_text(path, with_section(_read_text(path), markdown_section(report, _replay_command(args, windows))))
    if args.json:
        document = to_json(report)
        document["skipped"] = [{"file": str(s.path), "reason": s.reason} for s in skipped]
        print(json.dumps(document, indent=1))
    else:
        print(text_report(report))
        if skipped:
            print(f"{len(skipped)} file(s) left out (unreadable, or no completed tool call); --json lists them")
    return 0


def _replay_command(args: argparse.Namespace, windows: tuple[int, ...]) -> str:
    """The command line that makes the same replay page, paths left out."""
    words = ["fast-jev eval --replay", *(f"--window {w}" for w in windows)]
    if args.overhead:
        words.append(f"--overhead {args.overhead}")
    words += [f"--source {name}" for name in args.sources or ()]
    if args.serve:
        words.append("--serve")
    elif args.jev_url:
        words.append(f"--jev-url {args.jev_url}")
    return " ".join([*words, f"--markdown {args.markdown}"])
