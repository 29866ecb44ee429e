"""``fast-jev log`` and ``fast-jev stats``: read the decision log.

A missing database is the empty state (nothing was compacted yet), not an error. Bad input
(a directory, a file that is not a decision log, ``-n -1``, an ambiguous call id) exits 2 with a
message. The output is bounded by default (the newest 3 compactions), as it may be read into a
model's context by the slash commands, which also cut it with ``--max-lines``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ..audit import report
from ..audit.store import DecisionLog, DecisionLogBusy, DecisionLogError, Totals, default_db_path, open_log
from ..errors import EXIT_BAD_INPUT as EXIT_USAGE
from ..errors import EXIT_FAILED as EXIT_BUSY
from ..errors import EXIT_OK
from ..textutil import terminal_safe
from .arguments import add_db_option, whole_number


def _add_common(parser: argparse.ArgumentParser) -> None:
    add_db_option(parser)
    parser.add_argument("--session", metavar="ID", help="only this Claude Code session (a unique prefix of its id will do)")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument(
        "--arguments-on-stdin", action="store_true",
        help="read more options from stdin, written as shell words (the slash commands pass the "
        "user's arguments this way, so no shell reads them); options on the command line win",
    )


DEFAULT_COUNT = 3


_count = whole_number(0, "0 (everything) or more")


def add_parser(subparsers: Any) -> None:
    """Register both ``log`` and ``stats`` (cli.py maps both names to this module)."""
    log = subparsers.add_parser(
        "log",
        help="show recent compactions and their per-call decisions",
        description="Show the newest compactions (3 unless -n says otherwise), oldest first, each "
        "with a table of its per-call decisions. `fast-jev log path` prints where the log is.",
    )
    log.add_argument("what", nargs="?", choices=("path",), help="path: print the decision log's location")
    _add_common(log)
    log.add_argument("-n", "--last", dest="count", metavar="N", type=_count, default=DEFAULT_COUNT,
                     help=f"the newest N compactions; 0 for all (default: {DEFAULT_COUNT})")
    log.add_argument("--why", metavar="CALL",
                     help="every decision about one tool call: its id, a unique prefix of it, or the "
                     "short id (t3) of the newest compaction that has one")
    log.add_argument("--max-lines", metavar="N", type=_count, default=0,
                     help="cut the output after N lines and say how much was left out, as the slash "
                     "command does (default: no cut)")
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


class Ambiguous(Exception):
    pass


def resolve_call(log: DecisionLog, ref: str, session: str | None) -> str | None:
    """The full tool_use_id ``ref`` names, or None when no decision mentions it."""
    compactions = log.compactions(session_id=session)
    if re.fullmatch(r"t\d+", ref):
        for compaction in reversed(compactions):  # newest first
            for d in log.decisions_for(compaction.id or 0):
                if d.call_id == ref:
                    return d.tool_use_id
        return None
    ids = {d.tool_use_id for c in compactions for d in log.decisions_for(c.id or 0)}
    if ref in ids:
        return ref
    matches = sorted(i for i in ids if i.startswith(ref))
    if len(matches) > 1:
        shown = ", ".join(matches[:3]) + (", …" if len(matches) > 3 else "")
        raise Ambiguous(f"{len(matches)} tool calls start with {ref!r} ({shown}); give more of the id")
    return matches[0] if matches else None


def resolve_session(log: DecisionLog, ref: str | None) -> str | None:
    """A session id, or a unique prefix of one (session ids are long UUIDs)."""
    if ref is None:
        return None
    ids = {c.session_id for c in log.compactions()}
    if ref in ids:
        return ref
    matches = sorted(i for i in ids if i.startswith(ref))
    if len(matches) > 1:
        raise Ambiguous(f"{len(matches)} sessions start with {ref!r}; give more of the id")
    return matches[0] if matches else ref


def _bounded(text: str, max_lines: int) -> str:
    lines = text.splitlines()
    if not max_lines or len(lines) <= max_lines:
        return text
    left = len(lines) - max_lines
    return "\n".join([*lines[:max_lines], f"… {left:,} more lines; run `fast-jev log` in a shell to see them"]) + "\n"


def _empty(path: Path, session: str | None) -> str:
    where = f" for session {session}" if session is not None else ""
    if path.exists():
        return f"No compactions recorded yet{where}.\n"
    return (
        f"No compactions recorded yet{where}: there is no decision log at {path} yet. The plugin "
        "creates it at its first compaction; `fast-jev compact --log` records CLI runs there.\n"
    )


def run_log(args: argparse.Namespace) -> int:
    path = Path(args.db).expanduser() if args.db else default_db_path()
    if args.what == "path":
        print(path)
        return EXIT_OK
    last = args.count or None
    why: list[Any] = []
    compactions: list[Any] = []
    decisions: dict[int, list[Any]] = {}
    tool_use_id: str | None = args.why
    try:
        log = _open(path)
        if log is not None:
            with log:
                args.session = resolve_session(log, args.session)
                if args.why is not None:
                    tool_use_id = resolve_call(log, args.why, args.session) or args.why
                    why = log.why(tool_use_id)
                else:
                    compactions = log.compactions(session_id=args.session, last=last)
                    decisions = {c.id: log.decisions_for(c.id) for c in compactions if c.id is not None}
    except Ambiguous as exc:
        return _fail("log", f"{exc}")
    except DecisionLogBusy as exc:
        return _fail("log", str(exc), EXIT_BUSY)
    except DecisionLogError as exc:
        return _fail("log", str(exc))
    if args.why is not None:
        if args.session is not None:
            why = [(c, d) for c, d in why if c.session_id == args.session]
        if last is not None:
            why = why[:last]  # newest first, so these are the newest N
        sys.stdout.write(terminal_safe(_bounded(report.format_why(why, tool_use_id, json=args.json), args.max_lines)))
        return EXIT_OK
    if not compactions and not args.json:
        sys.stdout.write(terminal_safe(_empty(path, args.session)))
        return EXIT_OK
    text = report.format_log(compactions, decisions, json=args.json)
    sys.stdout.write(terminal_safe(_bounded(text, args.max_lines)))
    return EXIT_OK


def run_stats(args: argparse.Namespace) -> int:
    path = Path(args.db).expanduser() if args.db else default_db_path()
    try:
        log = _open(path)
        if log is None:
            totals, lifetime = Totals(), Totals()
        else:
            with log:
                args.session = resolve_session(log, args.session)
                lifetime = log.totals()
                totals = log.totals(args.session) if args.session is not None else lifetime
    except Ambiguous as exc:
        return _fail("stats", str(exc))
    except DecisionLogBusy as exc:
        return _fail("stats", str(exc), EXIT_BUSY)
    except DecisionLogError as exc:
        return _fail("stats", str(exc))
    archive = archive_usage(path.parent / "archive")
    if args.json:
        doc = report.stats_document(totals, args.session, lifetime, db=str(path))
        doc["archive"] = archive
        print(terminal_safe(json.dumps(doc, ensure_ascii=False, indent=2)))
    else:
        sys.stdout.write(terminal_safe(report.format_stats(totals, args.session, lifetime)))
        if archive["files"]:
            print(
                f"archive: {archive['files']} saved outputs, {archive['bytes'] / 2**20:.1f} MiB in {archive['path']} "
                "(the oldest go past 512 MiB or 30 days)"
            )
        else:
            print("archive: no saved outputs yet")
    return EXIT_OK


def archive_usage(folder: Path) -> dict[str, Any]:
    """How many cut outputs the archive beside the log holds, and their size."""
    files = size = 0
    try:
        for entry in os.scandir(folder):
            if entry.is_file(follow_symlinks=False) and entry.name.endswith(".txt"):
                files += 1
                size += entry.stat(follow_symlinks=False).st_size
    except OSError:
        pass  # no archive yet
    return {"path": str(folder), "files": files, "bytes": size}
