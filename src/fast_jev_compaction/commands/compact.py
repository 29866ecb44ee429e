"""``fast-jev compact``: compact a transcript file and write the kept messages.

Its flags come from the option table (``options.OPTIONS``, the ``cli`` ones), parsed strictly:
a value out of its type or bounds is a one-line error naming the flag, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

from ..errors import EXIT_BAD_INPUT, EXIT_OK, exit_code, explain
from ..options import DEFAULT_LOG, OPTIONS, Option, OptionValueError
from ..private_files import FILE_MODE

DESCRIPTION = """\
Read a Claude Code transcript (JSONL) or a JSON list of SessionMessages, decide for every tool
call whether it is kept, truncated or dropped, and write the compacted messages. The user's
prompts are kept verbatim; with --window, when cutting outputs is not enough, the oldest turns
move whole to the archive, each leaving one index line. The judge is the embedded one unless a
Jev key or endpoint is configured (--api-key, $TYPESAFE_API_KEY, --jev-url).

exit codes: 0 done, 1 the judge or the budget failed (nothing written), 2 bad input,
130 interrupted
"""


def _parser_for(option: Option) -> Any:
    def parse(text: str) -> Any:
        try:
            return option.parse(text)
        except OptionValueError as exc:
            raise argparse.ArgumentTypeError(exc.why) from None

    parse.__name__ = option.kind  # argparse names the type in some messages
    return parse


def add_option_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per ``cli`` option of the table, in table order, help and default from it."""
    for option in OPTIONS:
        if "cli" not in option.where or option.flag is None:
            continue
        names = [option.flag, *([option.short] if option.short else [])]
        bounds = f", {option.bounds_text}" if option.kind in ("number", "integer") and option.bounds_text else ""
        kwargs: dict[str, Any] = {
            "dest": option.name,
            "default": option.default,
            "help": f"{option.help} (default: {option.default_text}{bounds})".replace("%", "%%"),
        }
        if option.kind == "flag":
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = _parser_for(option)
            kwargs["metavar"] = option.metavar or ("{" + ",".join(option.choices) + "}" if option.choices else None)
            if option.const is not None:
                kwargs.update(nargs="?", const=option.const)
        parser.add_argument(*names, **kwargs)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("compact", help="compact a transcript", description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="transcript JSONL, JSON list of SessionMessages, or - for stdin")
    add_option_flags(p)
    p.set_defaults(run=run)


def _fail(message: str, code: int) -> int:
    print(f"fast-jev compact: {message}", file=sys.stderr)
    return code


def make_asker(args: argparse.Namespace, report: Any = None) -> tuple[Any, str]:
    """The judge to ask and its name; the HTTP client is imported only when it is used."""
    from ..jev.providers import wants_jev

    if not wants_jev(args.judge, provider=args.provider, api_key=args.api_key, base_url=args.base_url):
        from ..judge.local import LocalJudge

        return LocalJudge(), "local"
    from ..jev.client import JevClient

    client = JevClient(
        provider=args.provider, api_key=args.api_key or None, base_url=args.base_url or None,
        model=args.model, timeout_s=args.jev_timeout_seconds, report=report,
    )
    return client, "jev"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def _payload(result: Any, fmt: str, out: str) -> Iterator[str]:
    """The output in pieces, one message at a time: the whole text is never built."""
    if fmt == "transcript":
        from ..conversation.session_file import transcript_lines

        yield from transcript_lines(result.messages, session_id_for(out))
        return
    if fmt == "jsonl":
        for message in result.messages:
            yield json.dumps(message.to_wire(), ensure_ascii=False) + "\n"
        return
    # Byte for byte what json.dumps(list, indent=1) writes: each item one level deeper (JSON
    # strings hold no raw line break, so indenting every line is safe).
    if not result.messages:
        yield "[]\n"
        return
    for index, message in enumerate(result.messages):
        item = json.dumps(message.to_wire(), ensure_ascii=False, indent=1).replace("\n", "\n ")
        yield ("[\n " if index == 0 else ",\n ") + item
    yield "\n]\n"


def session_id_for(out: str) -> str | None:
    """A transcript written as ``<uuid>.jsonl`` is that session; any other name gets a new id."""
    import uuid

    stem = Path(out).stem if out else ""
    try:
        return str(uuid.UUID(stem))
    except ValueError:
        return None


def _summary_document(result: Any, judge: str, args: argparse.Namespace) -> dict[str, Any]:
    from dataclasses import asdict

    from ..stats import summarize

    stats = result.stats
    return {
        "summary": summarize(stats),
        "reduction": round(stats.reduction_ratio, 4),
        "judge": judge,
        "out": args.out or None,
        "format": args.format,
        "keep": stats.kept,
        "truncate": stats.truncated,
        "drop": stats.dropped,
        "pinned": stats.pinned,
        "archive": options_archive(args),
        "stats": asdict(stats),
    }


def options_archive(args: argparse.Namespace) -> str | None:
    archive = None if args.no_archive else (args.archive or (f"{args.out}.archive" if args.out else None))
    from ..decide.archive import as_marked  # what a marker names: the folder's bytes as UTF-8

    return as_marked(os.path.abspath(archive)) if archive else None


def decisions_text(result: Any) -> str:
    from ..audit.table import decision_row, decision_table

    calls = {call.tool_use_id: call for call in result.calls}
    rows = []
    for d in result.decisions:
        call = calls.get(d.tool_use_id)
        rows.append(decision_row(
            d.id, d.tool, call.input if call else None, call.result_chars if call else None,
            d.action, d.reason, None if d.reason == "pinned" else d.keep_call,
            None if d.reason == "pinned" else d.keep_result, d.chars_freed,
        ))
    return decision_table(rows)


def run(args: argparse.Namespace) -> int:
    from ..compaction import collector_paused, run_sync
    from ..conversation.transcript import load_messages, read_messages
    from ..errors import CompactionError
    from ..ladder import compact_to_fit
    from ..options import resolve_options
    from ..state.goal import compaction_goal
    from ..stats import summarize
    from .progress import CountingAsker, Progress

    if args.out and args.file != "-" and _same_file(args.out, args.file):
        return _fail(f"refusing to write onto the input {args.file}; give --out another file", EXIT_BAD_INPUT)
    try:
        # A file is read line by line (read_messages); stdin whole, its format known only then.
        messages = load_messages(sys.stdin.read(), "<stdin>") if args.file == "-" else read_messages(args.file, args.file)
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"cannot read {args.file}: {exc}", EXIT_BAD_INPUT)
    except CompactionError as exc:
        return _fail(explain(exc), exit_code(exc))
    options = resolve_options(
        goal=compaction_goal(messages, args.goal, args.instructions),
        keep_threshold=args.keep_threshold,
        preserve_recent_messages=args.preserve_recent_messages,
        max_state_tokens=args.max_state_tokens,
        max_request_tokens=args.max_request_tokens,
        truncate_head_chars=args.truncate_head_chars,
        max_concurrent_requests=args.max_concurrent_requests,
        digest_chars=args.digest_chars,
        policy=args.policy,
        target_reduction=args.target_reduction,
        keep_floor=args.keep_floor,
        archive_dir=options_archive(args),
        window_tokens=args.window_tokens,
        target_percent=args.target_percent,
    )

    progress = Progress()

    async def go() -> tuple[Any, str]:
        asker, judge = make_asker(args, report=progress.note)
        try:
            return await compact_to_fit(messages, CountingAsker(asker, progress), options), judge
        finally:
            close = getattr(asker, "aclose", None)
            if close is not None:
                await close()

    try:
        with progress, collector_paused():
            # Not asyncio.run: restoring its Ctrl-C handler costs seconds on a large result.
            result, judge = run_sync(go())
    except CompactionError as exc:
        code = exit_code(exc)
        tail = "" if code == EXIT_BAD_INPUT else "; nothing was written"
        return _fail(f"{explain(exc)}{tail}", code)

    if result.archive or result.media:
        from ..decide.archive import write_archive

        try:
            write_archive({**result.archive, **result.media})
        except OSError as exc:
            return _fail(f"cannot save the cut outputs under {options.archive_dir}: {exc}; "
                         "give --archive another folder, or --no-archive", EXIT_BAD_INPUT)

    payload = _payload(result, args.format, args.out)
    if args.out:
        try:
            # The compacted session holds the user's prompts and outputs: created 0600, as the
            # archive beside it (an existing file keeps the mode its owner gave it).
            fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
            with open(fd, "w", encoding="utf-8") as handle:
                handle.writelines(payload)
        except OSError as exc:
            return _fail(f"cannot write {args.out}: {exc}", EXIT_BAD_INPUT)
    else:
        sys.stdout.writelines(payload)
        sys.stdout.flush()
    summary_stream = sys.stdout if args.out else sys.stderr
    if args.json:
        print(json.dumps(_summary_document(result, judge, args), ensure_ascii=False), file=summary_stream)
    else:
        print(summarize(result.stats), file=summary_stream)
    if args.decisions:
        sys.stderr.write(decisions_text(result))
    if args.log:
        return _record(args, result, judge)
    return EXIT_OK


def _record(args: argparse.Namespace, result: Any, judge: str) -> int:
    """``--log``: one compaction row, trigger ``cli``, in the chosen decision log."""
    from ..audit.cli_record import record_cli_compaction
    from ..audit.store import DecisionLogError, default_db_path

    path = default_db_path() if args.log == DEFAULT_LOG else Path(args.log).expanduser()
    session = "stdin" if args.file == "-" else Path(args.file).stem
    try:
        number = record_cli_compaction(path, session, judge, result)
    except (DecisionLogError, OSError) as exc:
        return _fail(f"compacted, but the decision log {path} was not written: {exc}", 1)
    print(f"recorded as compaction #{number} in {path}", file=sys.stderr)
    return EXIT_OK
