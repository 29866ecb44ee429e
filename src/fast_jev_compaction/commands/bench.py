"""``fast-jev bench``: time and size the compaction of transcripts with the embedded judge."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help="measure compaction speed, memory and reduction",
        description="Compact each transcript with the embedded judge and report wall time "
        "(median of --repeat runs), peak Python memory, and the reduction.",
    )
    p.add_argument("paths", nargs="+", help="transcript files or folders (searched for *.jsonl)")
    p.add_argument("--repeat", type=_positive, default=3, metavar="N", help="runs per transcript, at least 1 (default: 3)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(run=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


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


def measure(path: Path, repeat: int) -> dict[str, Any]:
    """One transcript's numbers; read once, compacted ``repeat`` times."""
    import statistics
    import time
    import tracemalloc

    from ..compaction import compact_sync
    from ..judge.local import LocalJudge
    from ..transcript import read_messages

    messages = read_messages(path)
    timings = []
    result = None
    tracemalloc.start()
    try:
        for _ in range(repeat):
            started = time.perf_counter()
            result = compact_sync(messages, LocalJudge())
            timings.append((time.perf_counter() - started) * 1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result is not None
    stats = result.stats
    return {
        "file": str(path),
        "messages": stats.messages_before,
        "calls": stats.calls,
        "chars_before": stats.chars_before,
        "chars_after": stats.chars_after,
        "reduction": round(stats.reduction_ratio, 4),
        "stage": stats.state_stage,
        "requests": stats.requests,
        "median_ms": round(statistics.median(timings), 2),
        "peak_mib": round(peak / 2**20, 2),
    }


def run(args: argparse.Namespace) -> int:
    import sys

    from ..errors import EXIT_BAD_INPUT, CompactionError, explain
    from ..progress import Progress
    from ..stats import percent

    files, missing = _files(args.paths)
    if missing:
        print(f"fast-jev bench: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not files:
        print(f"fast-jev bench: no *.jsonl transcript in {', '.join(args.paths)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    rows, skipped = [], []
    with Progress() as progress:
        for number, path in enumerate(files, 1):
            progress.update(f"bench: {number}/{len(files)} {path.name}")
            try:
                rows.append(measure(path, args.repeat))
            except (CompactionError, OSError, ValueError, RecursionError, MemoryError) as exc:
                # One transcript that cannot be measured costs its own row, not everyone's.
                skipped.append({"file": str(path), "reason": explain(exc)})
    if args.json:
        print(json.dumps({"results": rows, "skipped": skipped}, indent=1))
        return 0
    for row in rows:
        print(
            f"{row['median_ms']:>9.1f} ms {row['peak_mib']:>7.1f} MiB {percent(row['reduction']):>7} "
            f"{row['calls']:>4} calls  {row['file']}"
        )
    if rows:
        before = sum(r["chars_before"] for r in rows)
        after = sum(r["chars_after"] for r in rows)
        total_ms = sum(r["median_ms"] for r in rows)
        print(f"{len(rows)} transcript(s): {total_ms:.1f} ms in all, {percent((before - after) / before if before else 0)} of characters removed")
    for item in skipped:
        print(f"skipped {item['file']}: {item['reason']}")
    return 0
