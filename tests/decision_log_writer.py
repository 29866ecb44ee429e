"""Child process for the multi-writer tests.

``python decision_log_writer.py write DB WRITER COMPACTIONS DECISIONS DIR BUDGET_S`` signals
readiness with ``DIR/ready-WRITER``, waits for ``DIR/go`` so every writer starts at the same
moment, then records COMPACTIONS compactions of DECISIONS decisions each, opening the log for each
one as the hook does (one transaction per compaction and its decisions). A write that cannot get
the lock within BUDGET_S goes to a spill entry, as in the hook. Prints ``OK WRITTEN SPILLED``.

``python decision_log_writer.py hold DB SECONDS DIR`` takes the write lock, records one row of its
own inside that transaction, touches ``DIR/held``, waits for ``DIR/go``, keeps the lock SECONDS
longer, then commits: every writer starts while the lock is held, however slowly they started.

Any failure exits non-zero with a traceback.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

from fast_jev_compaction.audit import CompactionRow, DecisionLog, DecisionRow, record_or_spill


def _wait_for(marker: Path) -> None:
    give_up = time.monotonic() + 120
    while not marker.exists():
        if time.monotonic() > give_up:
            raise SystemExit(f"never saw {marker.name}")
        time.sleep(0.005)


def write(db: str, writer: str, compactions: int, decisions: int, sync_dir: Path, budget_s: float) -> int:
    (sync_dir / f"ready-{writer}").touch()
    _wait_for(sync_dir / "go")
    written = spilled = 0
    for i in range(compactions):
        row = CompactionRow(
            session_id=f"writer-{writer}",
            trigger="auto",
            outcome="replaced",
            chars_before=100,
            chars_after=40,
            freed_chars=60,
            requests=1,
        )
        calls = [
            DecisionRow(tool_use_id=f"toolu_{writer}_{i}_{j}", call_id=f"t{j}", tool="Bash", action="drop_call")
            for j in range(decisions)
        ]
        result = record_or_spill(
            Path(db), row, calls, budget_s=budget_s, busy_timeout_ms=int(budget_s * 500)
        )
        if isinstance(result, Path):
            spilled += 1
        else:
            written += 1
    print(f"OK {written} {spilled}")
    return 0


def hold(db: str, seconds: float, sync_dir: Path) -> int:
    DecisionLog(db).close()  # the schema exists before the lock is taken
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO compactions (session_id, outcome) VALUES ('holder', 'skipped')")
    (sync_dir / "held").touch()
    _wait_for(sync_dir / "go")
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()
    print("OK held")
    return 0


def main(argv: list[str]) -> int:
    if argv[0] == "write":
        db, writer, compactions, decisions, sync_dir, budget = argv[1:7]
        return write(db, writer, int(compactions), int(decisions), Path(sync_dir), float(budget))
    if argv[0] == "hold":
        db, seconds, sync_dir = argv[1:4]
        return hold(db, float(seconds), Path(sync_dir))
    print(f"unknown mode {argv[0]!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
