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
    p.add_argument("--repeat", type=int, default=3, metavar="N", help="runs per transcript (default: 3)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(run=run)


def _files(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        found.extend(sorted(path.rglob("*.jsonl")) if path.is_dir() else [path])
    return found


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
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        result = compact_sync(messages, LocalJudge())
        timings.append((time.perf_counter() - started) * 1000)
    _, peak = tracemalloc.get_traced_memory()
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
    from ..stats import percent
    from ..transcript import TranscriptError

    rows, skipped = [], []
    for path in _files(args.paths):
        try:
            rows.append(measure(path, args.repeat))
        except (TranscriptError, OSError) as exc:
            skipped.append({"file": str(path), "reason": str(exc)})
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
