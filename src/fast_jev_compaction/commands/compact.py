"""``fast-jev compact``: compact a transcript file and write the kept messages."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

DESCRIPTION = """\
Read a Claude Code transcript (JSONL) or a JSON list of SessionMessages, decide for every tool
call whether it stays, is truncated or is dropped, and write the compacted messages. User and
assistant text is kept verbatim. The judge is the embedded one unless a Jev key is configured.
"""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("compact", help="compact a transcript", description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="transcript JSONL, JSON list of SessionMessages, or - for stdin")
    p.add_argument("--out", "-o", metavar="FILE", help="write the compacted messages here (default: stdout)")
    p.add_argument("--format", choices=("json", "jsonl"), default="json",
                   help="json: one list; jsonl: one message per line (default: json)")
    p.add_argument("--judge", choices=("auto", "local", "jev"), default="auto",
                   help="local: embedded offline judge; jev: the Jev API; auto: jev when a key is set (default: auto)")
    p.add_argument("--jev-url", metavar="URL", help="Jev endpoint (default: TypeSafe System One)")
    p.add_argument("--model", default=None, help="Jev model (default: jev-latest)")
    p.add_argument("--api-key", default=None, help="Jev API key (default: $TYPESAFE_API_KEY)")
    p.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                   help="deadline per Jev request, body included (default: 15)")
    p.add_argument("--goal", default="", help="what the session is working towards (default: the last 3 user prompts)")
    p.add_argument("--instructions", default="", help="extra focus, as in /compact <instructions>")
    p.add_argument("--keep-threshold", type=float, default=None, metavar="P",
                   help="use the threshold policy: keep when a probability reaches P, in [0,1]")
    p.add_argument("--target-reduction", type=float, default=None, metavar="SHARE",
                   help="budget policy: cut the least valuable outputs until this share of the candidates' output is freed (default: 0.7)")
    p.add_argument("--keep-floor", type=float, default=None, metavar="P",
                   help="budget policy: never cut an output the judge values at P or more (default: 0.8)")
    p.add_argument("--no-rules", action="store_true", help="ask the judge about every call, even those a rule settles")
    p.add_argument("--archive", metavar="DIR",
                   help="save every cut output here, content-addressed (default: FILE.archive beside --out)")
    p.add_argument("--no-archive", action="store_true", help="save nothing; markers then say to re-run the tool")
    p.add_argument("--preserve-recent", type=int, default=6, metavar="N",
                   help="the last N messages (and the first) are never touched (default: 6)")
    p.add_argument("--max-state-tokens", type=int, default=25000, metavar="N", help="state budget (default: 25000)")
    p.add_argument("--max-request-tokens", type=int, default=30000, metavar="N",
                   help="request budget, state plus questions (default: 30000)")
    p.add_argument("--truncate-head-chars", type=int, default=500, metavar="N",
                   help="characters of its opening a truncated output keeps (default: 500)")
    p.add_argument("--digest-chars", type=int, default=1600, metavar="N",
                   help="characters a truncated output keeps in all: opening, closing and key lines (default: 1600)")
    p.add_argument("--max-concurrent-requests", type=int, default=4, metavar="N",
                   help="judge requests in flight at once (default: 4)")
    p.add_argument("--decisions", action="store_true", help="also print one line per decided call to stderr")
    p.set_defaults(run=run)


def _fail(message: str, code: int) -> int:
    print(f"fast-jev compact: {message}", file=sys.stderr)
    return code


def make_asker(judge: str, api_key: str | None, url: str | None, model: str | None, timeout: float) -> tuple[Any, str]:
    """The judge to ask and its name; the HTTP client is imported only when it is used."""
    key = api_key or os.environ.get("TYPESAFE_API_KEY") or os.environ.get("OPENROUTER_API_KEY")
    if judge == "local" or (judge == "auto" and not key):
        from ..judge.local import LocalJudge

        return LocalJudge(), "local"
    from ..jev.client import JevClient

    kwargs: dict[str, Any] = {"api_key": key, "base_url": url, "timeout_s": timeout}
    if model:
        kwargs["model"] = model
    return JevClient(**kwargs), "jev"


def run(args: argparse.Namespace) -> int:
    import asyncio

    from ..compaction import compact
    from ..errors import CompactionError
    from ..goal import goal_with_instructions
    from ..options import resolve_options
    from ..stats import decision_log_lines, summarize
    from ..transcript import TranscriptError, load_messages

    try:
        if args.file == "-":
            text, source = sys.stdin.read(), "<stdin>"
        else:
            with open(args.file, encoding="utf-8") as handle:
                text, source = handle.read(), args.file
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"cannot read {args.file}: {exc}", 2)
    try:
        messages = load_messages(text, source)
        archive_dir = None if args.no_archive else (args.archive or (f"{args.out}.archive" if args.out else None))
        options = resolve_options(
            goal=goal_with_instructions(args.goal, args.instructions),
            keep_threshold=args.keep_threshold,
            policy="threshold" if args.keep_threshold is not None else "budget",
            target_reduction=args.target_reduction,
            keep_floor=args.keep_floor,
            use_rules=not args.no_rules,
            digest_chars=args.digest_chars,
            archive_dir=os.path.abspath(archive_dir) if archive_dir else None,
            preserve_recent_messages=args.preserve_recent,
            max_state_tokens=args.max_state_tokens,
            max_request_tokens=args.max_request_tokens,
            truncate_head_chars=args.truncate_head_chars,
            max_concurrent_requests=args.max_concurrent_requests,
        )
    except (TranscriptError, ValueError) as exc:
        return _fail(str(exc), 2)

    async def go() -> Any:
        asker, _ = make_asker(args.judge, args.api_key, args.jev_url, args.model, args.timeout)
        try:
            return await compact(messages, asker, options)
        finally:
            close = getattr(asker, "aclose", None)
            if close is not None:
                await close()

    try:
        result = asyncio.run(go())
    except (CompactionError, ValueError) as exc:
        return _fail(f"{exc}; the transcript was left as it was", 1)

    if result.archive:
        from ..archive import write_archive

        try:
            write_archive(result.archive)
        except OSError as exc:
            return _fail(f"cannot save the cut outputs under {options.archive_dir}: {exc} (use --archive DIR or --no-archive)", 2)

    wire = [m.to_wire() for m in result.messages]
    if args.format == "jsonl":
        payload = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in wire)
    else:
        payload = json.dumps(wire, ensure_ascii=False, indent=1) + "\n"
    summary = summarize(result.stats)
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as handle:
                handle.write(payload)
        except OSError as exc:
            return _fail(f"cannot write {args.out}: {exc}", 2)
        print(summary)
    else:
        sys.stdout.write(payload)
        print(summary, file=sys.stderr)
    if args.decisions:
        for line in decision_log_lines(result.decisions):
            print(line, file=sys.stderr)
    return 0
