"""``fast-jev bench``: time and size the compaction of transcripts with the embedded judge."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..options import JEV_DEFAULT_MODEL, CompactOptions
from .arguments import whole_number


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help="measure compaction speed, memory and reduction",
        description="Compact each transcript with the embedded judge and report CPU time "
        "(median of --repeat runs): the whole compaction, the judge's scoring within it, and the "
        "core alone per 1,000 messages (a constant judge through the state path); peak Python "
        "memory (from a traced run of its own) and the reduction.",
    )
    p.add_argument("paths", nargs="*", help="transcript files or folders (searched for *.jsonl)")
    p.add_argument("--synthetic", type=int, action="append", default=[], metavar="MESSAGES",
                   help="also measure a generated transcript of about MESSAGES messages (repeatable)")
    p.add_argument("--repeat", type=_positive, default=3, metavar="N", help="runs per transcript, at least 1 (default: 3)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--jev-tokens", action="store_true",
                   help="instead, measure the judge's tokens on the wire: a generated ~200k-token session "
                        "compacted, grown by 5 %% and compacted again, against fast-jev serve on 127.0.0.1")
    p.set_defaults(run=run)


_positive = whole_number(1)


def _files(paths: list[str]) -> tuple[list[Path], list[str]]:
    """The transcripts to measure, and the paths that do not exist."""
    found: list[Path] = []
    missing: list[str] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            missing.append(raw)
        else:
            found.extend(sorted(path.rglob("*.jsonl")) if path.is_dir() else [path])
    return found, missing


# The core is timed asking about every call the rules leave, as the TypeScript core does: the
# budget policy asks a remote judge only about outputs it could cut, which on short outputs
# would skip the state path altogether.
CORE_OPTIONS = CompactOptions(policy="threshold")


class ConstantAsker:
    """The judge left out: every question answered 0.5 at once, through the whole state path
    (fitting, windows, batches, validation), so the timing is the core's own."""

    # It waits on nothing: the compaction is stepped through without an event loop, as with the
    # embedded judge (an event loop is the transport's cost, not the core's).
    answers_at_once = True

    def __init__(self, measure: bool = False) -> None:
        # Measuring each request's size is the judge's work, not the core's: off while timing.
        self.measure = measure
        self.largest_request = 0

    async def ask(self, state: Any, questions: Any) -> Any:
        from ..state.asker import AskResult

        if self.measure:
            from ..state.tokens import estimate_tokens
            from ..textutil import js_json

            body = estimate_tokens(js_json({"model": JEV_DEFAULT_MODEL, "state": state, "questions": questions}))
            self.largest_request = max(self.largest_request, body)
        return AskResult({name: {"type": "noul", "noul": 0.5} for name in questions})


class TimedJudge:
    """The embedded judge, with the CPU time of its own scoring summed apart from the core's."""

    def __init__(self) -> None:
        from ..judge.local import LocalJudge

        self.judge = LocalJudge()
        self.cpu_s = 0.0

    def score_calls(self, messages: Any, pairing: Any, goal: str, only: Any = None) -> dict[str, tuple[float, float]]:
        import time

        started = time.process_time()
        try:
            return self.judge.score_calls(messages, pairing, goal, only=only)
        finally:
            self.cpu_s += time.process_time() - started

    async def ask(self, state: Any, questions: Any) -> Any:
        return await self.judge.ask(state, questions)


def measure(path: Path, repeat: int) -> dict[str, Any]:
    """One transcript's numbers; read once, compacted ``repeat`` times by each judge.

    Times are CPU time of this process (the machine may be shared: wall time says more about the
    neighbours than about the code), the median of the runs. Memory is traced in a run of its
    own, since tracing slows every allocation several times over. Every pass runs with the
    collector paused, as the CLI and the hook run theirs.
    """
    import statistics
    import time
    import tracemalloc

    from ..compaction import collector_paused, compact_sync
    from ..conversation.transcript import read_messages
    from ..judge.local import LocalJudge

    size = path.stat().st_size
    tracemalloc.start()
    try:
        messages = read_messages(path)
        _, read_peak = tracemalloc.get_traced_memory()
        with collector_paused():
            result = compact_sync(messages, LocalJudge())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        # A transcript that fails must not leave tracing on for the next one.
        tracemalloc.stop()
    runs = max(1, repeat)
    timings, judged, core = [], [], []
    for _ in range(runs):
        judge = TimedJudge()
        with collector_paused():
            started = time.process_time()
            compact_sync(messages, judge)
            timings.append((time.process_time() - started) * 1000)
        judged.append(judge.cpu_s * 1000)
    for _ in range(runs):
        with collector_paused():
            started = time.process_time()
            compact_sync(messages, ConstantAsker(), CORE_OPTIONS)
            core.append((time.process_time() - started) * 1000)
    asker = ConstantAsker(measure=True)
    core_result = compact_sync(messages, asker, CORE_OPTIONS)
    stats = result.stats
    core_ms = statistics.median(core)
    count = stats.messages_before

    def per_1k(ms: float) -> float:
        return round(ms * 1000 / count, 2) if count else 0.0

    judge_ms = statistics.median(judged)
    return {
        "file": str(path),
        "messages": count,
        "calls": stats.calls,
        "chars_before": stats.chars_before,
        "chars_after": stats.chars_after,
        "reduction": round(stats.reduction_ratio, 4),
        "stage": stats.state_stage,
        "requests": stats.requests,
        # The whole compaction with the embedded judge, and the judge's own scoring within it.
        "median_ms": round(statistics.median(timings), 2),
        "judge_ms": round(judge_ms, 2),
        "judge_ms_per_1k_messages": per_1k(judge_ms),
        "peak_mib": round(peak / 2**20, 2),
        "bytes": size,
        # Python memory at its highest while reading and compacting, over the file's size.
        "peak_over_size": round(max(peak, read_peak) / size, 2) if size else 0.0,
        # The core alone: the constant judge, through states, windows and batches.
        "core_ms": round(core_ms, 2),
        "core_ms_per_1k_messages": per_1k(core_ms),
        # The least disturbed run: on a shared machine a run is only ever slowed by its
        # neighbours, so the fastest says most about the code, the median about the machine.
        "core_ms_fastest": round(min(core), 2),
        "core_requests": core_result.stats.requests,
        "core_windows": core_result.stats.windows,
        "largest_request_tokens": asker.largest_request,
    }


def run(args: argparse.Namespace) -> int:
    import sys
    import tempfile

    from ..errors import EXIT_BAD_INPUT, CompactionError, explain
    from ..evaluation.synthetic import transcript_lines
    from ..stats import percent
    from .progress import Progress

    if args.jev_tokens:
        return _jev_tokens(args.json)
    files, missing = _files(args.paths)
    if missing:
        print(f"fast-jev bench: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not files and not args.synthetic:
        where = ", ".join(args.paths) or "no path given"
        print(f"fast-jev bench: no *.jsonl transcript ({where}); give paths or --synthetic N", file=sys.stderr)
        return EXIT_BAD_INPUT
    rows, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="fast-jev-bench-") as folder, Progress() as progress:
        for count in args.synthetic:
            path = Path(folder) / f"synthetic-{count}.jsonl"
            with path.open("w", encoding="utf-8") as out:
                out.writelines(line + "\n" for line in transcript_lines(count))
            files.append(path)
        for number, path in enumerate(files, 1):
            progress.update(f"bench: {number}/{len(files)} {path.name}")
            try:
                rows.append({**measure(path, args.repeat), **spawned_memory(path)})
            except (CompactionError, OSError, ValueError, RecursionError, MemoryError) as exc:
                # One transcript that cannot be measured costs its own row, not everyone's.
                skipped.append({"file": str(path), "reason": explain(exc)})
        progress.update("bench: hook start")
        start = hook_start_row(args.repeat)
    if args.json:
        print(json.dumps({"results": rows, "skipped": skipped, "hook_start": start}, indent=1))
        return 0
    for row in rows:
        print(
            f"{row['median_ms']:>9.1f} ms {row['peak_mib']:>7.1f} MiB {percent(row['reduction']):>7} "
            f"{row['calls']:>4} calls  core {row['core_ms_per_1k_messages']:>6.1f} ms/1k msgs  "
            f"judge {row['judge_ms']:>7.1f} ms  {row['file']}"
        )
    if rows:
        before = sum(r["chars_before"] for r in rows)
        after = sum(r["chars_after"] for r in rows)
        total_ms = sum(r["median_ms"] for r in rows)
        print(f"{len(rows)} transcript(s): {total_ms:.1f} ms of CPU in all, {percent((before - after) / before if before else 0)} of characters removed")
        messages = sum(r["messages"] for r in rows)
        core_ms = sum(r["core_ms"] for r in rows)
        if messages:
            fastest = sum(r["core_ms_fastest"] for r in rows)
            print(
                f"core without the judge: {core_ms * 1000 / messages:.1f} ms per 1,000 messages ({messages} messages; "
                f"the median of {args.repeat} run(s) each, {fastest * 1000 / messages:.1f} for the fastest)"
            )
            judge_ms = sum(r["judge_ms"] for r in rows)
            print(f"embedded judge's scoring: {judge_ms:.1f} ms in all, {judge_ms * 1000 / messages:.1f} ms per 1,000 messages")
        generated = sorted((r for r in rows if Path(r["file"]).name.startswith("synthetic-")), key=lambda r: r["messages"])
        if len(generated) >= 2:
            small, large = generated[0], generated[-1]
            print(
                f"scale: {large['messages'] / small['messages']:.1f}x the messages took "
                f"{large['core_ms'] / small['core_ms']:.1f}x the core time and "
                f"{large['median_ms'] / small['median_ms']:.1f}x the time with the embedded judge"
            )
    for line in spawned_lines(rows, start):
        print(line)
    for item in skipped:
        print(f"skipped {item['file']}: {item['reason']}")
    return 0


def _jev_tokens(as_json: bool) -> int:
    import dataclasses
    import tempfile

    from ..evaluation.judge_cost import measure, render

    with tempfile.TemporaryDirectory(prefix="fast-jev-bench-") as folder:
        reports = [measure(Path(folder), policy) for policy in ("budget", "threshold")]
    if as_json:
        print(json.dumps({"jev_tokens": [dataclasses.asdict(r) for r in reports]}, indent=1))
    else:
        print(render(reports), end="")
    return 0


# Below this size a transcript's peak is not read from spawned processes: a process's own
# resident size varies by ~0.1 MB from run to run (measured), which over a 5 kB transcript
# would read as 20x; from 1 MB on the variation is under a tenth of the size.
RSS_MIN_BYTES = 1_000_000


def spawned_memory(path: Path) -> dict[str, Any]:
    """The CLI's and the hook's peak memory on ``path``, from spawned processes (``spawned.py``);
    nothing for a transcript under ``RSS_MIN_BYTES``."""
    if path.stat().st_size < RSS_MIN_BYTES:
        return {}
    from .spawned import peak_memory

    return peak_memory(path)


def hook_start_row(repeat: int) -> dict[str, Any] | None:
    """CPU of the spawned hook on a 30-message event; several runs, as a child's CPU varies."""
    from .spawned import hook_start

    return hook_start(max(5, 3 * repeat))


def _start_trouble(start: dict[str, Any]) -> str:
    failed = f"; {start['failed']} runs failed" if start["failed"] else ""
    answered = "" if start["action"] == "replace" else f"; it answered {start['action']}, not replace"
    return failed + answered


def spawned_lines(rows: list[dict[str, Any]], start: dict[str, Any] | None) -> list[str]:
    """Peak memory per transcript (spawned CLI and hook, and tracemalloc's in process) and the hook's start."""
    lines = []
    for row in rows:
        if "cli_over_size" not in row:
            continue
        hook = f", hook {row['hook_over_size']:.1f}x" if "hook_over_size" in row else ""
        lines.append(
            f"peak memory over the transcript's size: fast-jev compact {row['cli_over_size']:.1f}x{hook} "
            f"(RSS over a 30-message run), in process {row['peak_over_size']:.1f}x (tracemalloc)  {row['file']}"
        )
    small = sum("cli_over_size" not in row for row in rows)
    if small:
        lines.append(
            f"peak memory: not read for {small} transcript(s) under {RSS_MIN_BYTES / 1e6:.1f} MB, where a "
            "process's own variation outweighs what the transcript costs (--synthetic 200000 gives a 66 MB one)"
        )
    if start is None:
        lines.append("hook start: not measured (hooks/fast_jev_hook.py is not beside the package)")
    else:
        lines.append(
            f"hook start: {start['cpu_ms']:.1f} ms of CPU for a {start['messages']}-message event "
            f"(median of {start['runs']} spawned runs, {start['cpu_ms_min']:.1f}-{start['cpu_ms_max']:.1f}; "
            f"the interpreter alone {start['interpreter_cpu_ms']:.1f}) in {start['python']}"
            + _start_trouble(start)
        )
        bench = start["bench_interpreter"]
        lines.append(
            f"hook start under the bench's own interpreter {start['bench_python']} (its site-packages and .pth files): "
            f"{bench['cpu_ms']:.1f} ms ({bench['cpu_ms_min']:.1f}-{bench['cpu_ms_max']:.1f}; "
            f"the interpreter alone {bench['interpreter_cpu_ms']:.1f})" + _start_trouble(bench)
        )
    return lines
