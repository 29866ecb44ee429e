"""``fast-jev log`` and ``fast-jev stats``: read the decision log.

A missing database is the empty state (nothing was compacted yet), not an error. Bad input
(a directory, a file that is not a decision log, ``--last 0``) exits 2 with a message.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..audit import report
from ..audit.store import DecisionLog, DecisionLogBusy, DecisionLogError, Totals, default_db_path, open_log

EXIT_OK = 0
EXIT_BUSY = 1
EXIT_USAGE = 2


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="decision log file (default: $FAST_JEV_DB, $CLAUDE_PLUGIN_DATA/decisions.sqlite, "
        "or the plugin data dir under ~/.claude)",
    )
    parser.add_argument("--session", metavar="ID", help="only this Claude Code session")
    parser.add_argument("--json", action="store_true", help="print a JSON document")


def add_parser(subparsers: Any) -> None:
    """Register both ``log`` and ``stats`` (cli.py maps both names to this module)."""
    log = subparsers.add_parser(
        "log",
        help="show recorded compactions and their per-call decisions",
        description="Show recorded compactions, oldest first, and each per-call decision.",
    )
    _add_common(log)
    log.add_argument("--last", metavar="N", type=_positive_int, help="only the newest N compactions")
    log.add_argument("--why", metavar="TOOL_USE_ID", help="every decision taken about one tool call")
    log.set_defaults(run=run_log)

    stats = subparsers.add_parser(
        "stats",
        help="how much context compaction kept out, and at what cost",
        description="Strict compression stats: only chars that were in the context count.",
    )
    _add_common(stats)
    stats.set_defaults(run=run_stats)


def _fail(command: str, message: str, code: int = EXIT_USAGE) -> int:
    print(f"fast-jev {command}: {message}", file=sys.stderr)
    return code


def _open(path: Path) -> DecisionLog | None:
    """The log, or None when nothing was recorded yet (the empty state)."""
    return open_log(path)


def run_log(args: argparse.Namespace) -> int:
    path = Path(args.db).expanduser() if args.db else default_db_path()
    try:
        log = _open(path)
        if log is None:
            compactions: list[Any] = []
            decisions: dict[int, list[Any]] = {}
            why: list[Any] = []
        else:
            with log:
                if args.why is not None:
                    why = log.why(args.why)
                    compactions, decisions = [], {}
                else:
                    compactions = log.compactions(session_id=args.session, last=args.last)
                    decisions = {c.id: log.decisions_for(c.id) for c in compactions if c.id is not None}
                    why = []
    except DecisionLogBusy as exc:
        return _fail("log", str(exc), EXIT_BUSY)
    except DecisionLogError as exc:
        return _fail("log", str(exc))
    if args.why is not None:
        if args.session is not None:
            why = [(c, d) for c, d in why if c.session_id == args.session]
        if args.last is not None:
            why = why[: args.last]  # newest first, so these are the newest N
        sys.stdout.write(report.format_why(why, args.why, json=args.json))
        return EXIT_OK
    if not compactions and not args.json:
        where = f" for session {args.session}" if args.session is not None else ""
        missing = "" if path.exists() else f" (no decision log at {path})"
        print(f"No compactions recorded yet{where}{missing}.")
        return EXIT_OK
    sys.stdout.write(report.format_log(compactions, decisions, json=args.json))
    return EXIT_OK


def run_stats(args: argparse.Namespace) -> int:
    path = Path(args.db).expanduser() if args.db else default_db_path()
    try:
        log = _open(path)
        if log is None:
            totals, lifetime = Totals(), Totals()
        else:
            with log:
                lifetime = log.totals()
                totals = log.totals(args.session) if args.session is not None else lifetime
    except DecisionLogBusy as exc:
        return _fail("stats", str(exc), EXIT_BUSY)
    except DecisionLogError as exc:
        return _fail("stats", str(exc))
    if args.json:
        doc = report.stats_document(totals, args.session, lifetime, db=str(path))
        print(json.dumps(doc, ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(report.format_stats(totals, args.session, lifetime))
    return EXIT_OK
