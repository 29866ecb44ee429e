"""Child process for the multi-writer test: ``python decision_log_writer.py DB WRITER N DIR``.

Signals readiness with ``DIR/ready-WRITER``, waits for ``DIR/go`` so every writer opens (and
possibly creates) the database at the same moment, then records N compactions, opening the log
for each one as the hook does. Prints ``OK N``; any failure exits non-zero with a traceback.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from fast_jev_compaction.audit import CompactionRow, DecisionLog, DecisionRow


def main(argv: list[str]) -> int:
    db, writer, count, sync_dir = argv[0], argv[1], int(argv[2]), Path(argv[3])
    (sync_dir / f"ready-{writer}").touch()
    give_up = time.monotonic() + 60
    while not (sync_dir / "go").exists():  # the parent starts everyone at once
        if time.monotonic() > give_up:
            print("never got the go signal", file=sys.stderr)
            return 3
        time.sleep(0.005)
    for i in range(count):
        with DecisionLog(db) as log:
            log.record(
                CompactionRow(
                    session_id=f"writer-{writer}",
                    trigger="auto",
                    outcome="replaced",
                    chars_before=100,
                    chars_after=40,
                    freed_chars=60,
                    requests=1,
                ),
                [
                    DecisionRow(tool_use_id=f"toolu_{writer}_{i}_a", call_id="t1", tool="Read", action="keep"),
                    DecisionRow(tool_use_id=f"toolu_{writer}_{i}_b", call_id="t2", tool="Bash", action="drop_call"),
                ],
            )
    print(f"OK {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
