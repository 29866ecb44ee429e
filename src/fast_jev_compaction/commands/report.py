"""``fast-jev report [SESSION|last|all] [--html FILE]``: compactions as text or one page.

``last`` (the default) is the session of the newest compaction, ``all`` every session (newest
first); a SESSION may be any unique prefix of a session id. A missing or empty log is the empty state (exit 0, and the page says so);
an unknown or ambiguous session, or a file that is not a decision log, exits 2; a log locked past
the retry budget exits 1, as ``fast-jev log`` does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..audit.html import render_page
from ..audit.session import SessionSummary, summarise, summary_text
from ..audit.store import DecisionLog, DecisionLogBusy, DecisionLogError, default_db_path
from ..errors import EXIT_BAD_INPUT as EXIT_USAGE
from ..errors import EXIT_FAILED as EXIT_BUSY
from ..errors import EXIT_OK
from ..private_files import write_private
from ..textutil import terminal_safe
from .arguments import add_db_option

LAST = "last"
ALL = "all"


class _SessionError(Exception):
    pass


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="one session's compactions: a short summary, or a self-contained HTML page",
        description="Show one session's compactions: context before and after, and each call kept, "
        "truncated or dropped. With --html, write a single self-contained page (no network).",
    )
    parser.add_argument(
        "session",
        nargs="?",
        default=LAST,
        metavar="SESSION|last|all",
        help="a session id or a unique prefix of one, 'last' (the default: the newest compaction's "
        "session) or 'all' (every session, newest first)",
    )
    parser.add_argument("--html", metavar="FILE", help="write the page to FILE ('-' for stdout)")
    add_db_option(parser)
    parser.set_defaults(run=run)


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"fast-jev report: {message}", file=sys.stderr)
    return code


def _pick_sessions(log: DecisionLog, wanted: str) -> list[str]:
    """The session ids ``wanted`` names, newest first; none when the log holds no compaction."""
    newest_first: list[str] = []
    for row in reversed(log.compactions()):
        if row.session_id not in newest_first:
            newest_first.append(row.session_id)
    if not newest_first or wanted == ALL:
        return newest_first
    if wanted == LAST:
        return newest_first[:1]
    if wanted in newest_first:
        return [wanted]
    matches = [s for s in newest_first if s.startswith(wanted)]
    if len(matches) == 1:
        return matches
    known = ", ".join(newest_first[:5]) + (", …" if len(newest_first) > 5 else "")
    if matches:
        raise _SessionError(f"{wanted!r} matches {len(matches)} sessions; give more of the id ({known})")
    raise _SessionError(f"no compaction recorded for session {wanted!r}; sessions, newest first: {known}")


def _read(path: Path, wanted: str) -> list[SessionSummary]:
    if not path.exists():
        return []
    with DecisionLog(path, create=False) as log:
        summaries = []
        for session_id in _pick_sessions(log, wanted):
            rows = log.compactions(session_id=session_id)
            summaries.append(
                summarise(session_id, [(c, log.decisions_for(c.id)) for c in rows if c.id is not None])
            )
        return summaries


def run(args: argparse.Namespace) -> int:
    path = Path(args.db).expanduser() if args.db else default_db_path()
    try:
        sessions = _read(path, args.session)
    except DecisionLogBusy as exc:
        return _fail(str(exc), EXIT_BUSY)
    except (DecisionLogError, _SessionError) as exc:
        return _fail(str(exc))
    if not sessions and args.session not in (LAST, ALL):
        return _fail(f"no compaction recorded for session {args.session!r} (decision log {path} is empty or missing)")
    source = str(path) if path.exists() else f"{path}, not created yet"
    if args.html is None:
        sys.stdout.write(terminal_safe(summary_text(sessions, f"decision log {source}")))
        return EXIT_OK
    page = render_page(sessions, source)
    if args.html == "-":
        sys.stdout.write(terminal_safe(page))
        return EXIT_OK
    target = Path(args.html).expanduser()
    if target.is_dir():
        return _fail(f"--html {target} is a directory; give a file name such as {target / 'report.html'}")
    if not target.parent.is_dir():
        return _fail(f"--html {target}: folder {target.parent} does not exist")
    try:
        write_private(target, page.encode("utf-8"))
    except OSError as exc:
        return _fail(f"cannot write --html {target}: {exc.strerror or exc}")
    compactions = sum(len(s.compactions) for s in sessions)
    if not sessions:
        what = "no compactions recorded yet"
    elif len(sessions) == 1:
        what = f"{compactions:,} compaction(s) of session {sessions[0].session_id}"
    else:
        what = f"{compactions:,} compaction(s) in {len(sessions):,} sessions"
    print(terminal_safe(f"wrote {target} ({what})"))
    return EXIT_OK
