"""``fast-jev bench``'s spawned measurements: a child's own CPU and peak memory, the hook's start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fast_jev_compaction.commands.spawned import run_child

REPO = Path(__file__).resolve().parents[1]


def test_a_childs_peak_is_its_own_whatever_the_parent_holds() -> None:
    ballast = bytearray(160 * 2**20)
    ballast[:: 4096] = b"\x01" * len(ballast[:: 4096])  # resident, not just reserved
    idle = run_child([sys.executable, "-I", "-c", "pass"])
    busy = run_child([sys.executable, "-I", "-c", "x = bytearray(48 * 2**20); x[::4096] = b'1' * len(x[::4096])"])
    del ballast
    assert (idle.code, busy.code) == (0, 0)
    assert idle.peak_bytes < 100 * 2**20  # not the parent's 160 MiB
    assert 40 * 2**20 < busy.peak_bytes - idle.peak_bytes < 64 * 2**20
    assert run_child([sys.executable, "-c", "import sys; sys.exit(3)"]).code == 3


def test_bench_reports_peak_memory_and_the_hooks_start() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fast_jev_compaction.cli", "bench", str(REPO / "examples" / "session.jsonl"), "--repeat", "1", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (row,) = report["results"]
    assert row["cli_code"] == 0 and row["cli_over_size"] >= 0 and row["hook_over_size"] >= 0
    start = report["hook_start"]
    assert start["messages"] == 30 and start["runs"] == 5 and start["failed"] == 0
    assert 0 < start["cpu_ms_min"] <= start["cpu_ms"] <= start["cpu_ms_max"]
    # The bare interpreter is measured beside it, and a hook does more than start Python.
    assert 0 < start["interpreter_cpu_ms"] < start["cpu_ms"]
