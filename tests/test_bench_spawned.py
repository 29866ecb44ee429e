"""``fast-jev bench``'s spawned measurements: a child's own CPU and peak memory, the hook's start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import fast_jev_compaction
from fast_jev_compaction.commands.bench import spawned_lines
from fast_jev_compaction.commands.spawned import plugin_python, run_child

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


def test_a_hooks_answer_is_read_from_the_run_that_is_measured() -> None:
    answered = run_child([sys.executable, "-I", "-c", "print('{\"action\": \"skip\", \"log\": []}')"], answers=True)
    garbled = run_child([sys.executable, "-I", "-c", "print('Traceback (most recent call last):')"], answers=True)
    assert (answered.code, answered.action, garbled.action) == (0, "skip", "none")
    assert run_child([sys.executable, "-I", "-c", "print('{}')"]).action is None  # output discarded, unread


def test_bench_reports_peak_memory_and_the_hooks_start() -> None:
    bench = [sys.executable, "-m", "fast_jev_compaction.cli", "bench", str(REPO / "examples" / "session.jsonl"), "--synthetic", "4000", "--repeat", "1"]
    proc = subprocess.run([*bench, "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    small, generated = report["results"]
    # A few kB: a process's own variation would outweigh it, so no figure is made up for it.
    assert "cli_over_size" not in small and "hook_over_size" not in small
    assert generated["bytes"] >= 1_000_000
    # With one run the fastest is the median; the per-1k figure is that run's over the messages.
    assert 0 < generated["core_ms_fastest"] == generated["core_ms"]
    # Both figures are rounded to hundredths from the unrounded time: they agree within what
    # core_ms's own rounding (half a hundredth) moves the per-1k figure, plus its rounding.
    per_1k = generated["core_ms"] * 1000 / generated["messages"]
    assert abs(generated["core_ms_per_1k_messages"] - per_1k) <= 0.005 * 1000 / generated["messages"] + 0.005 + 1e-9
    assert generated["cli_code"] == 0 and 0 < generated["cli_over_size"] < 10 and 0 < generated["hook_over_size"] < 10
    start = report["hook_start"]
    assert start["messages"] == 30
    # Under the plugin-like venv, and under the bench's own interpreter beside it.
    # Resolved: the same interpreter may be named through a symlink or a "..".
    assert Path(start["bench_python"]).resolve() == Path(sys.executable).resolve() and "plugin's" in start["python"]
    for row in (start, start["bench_interpreter"]):
        # A hook that lacked an import would answer a (quick) fallback instead.
        assert row["runs"] == 5 and row["failed"] == 0 and row["action"] == "replace"
        assert 0 < row["cpu_ms_min"] <= row["cpu_ms"] <= row["cpu_ms_max"]
        # The bare interpreter is measured beside it, and a hook does more than start Python.
        assert 0 < row["interpreter_cpu_ms"] < row["cpu_ms"]


_WHAT_IT_SEES = """
import importlib.util, json, sys, fast_jev_compaction
print(json.dumps({"pytest": importlib.util.find_spec("pytest") is not None, "package": fast_jev_compaction.__file__,
                  "pydantic": importlib.util.find_spec("pydantic") is not None,
                  "prefix": sys.prefix, "site": [p for p in sys.path if p.endswith("site-packages")]}))
"""


def test_the_plugin_like_interpreter_holds_the_package_and_nothing_of_the_benchs(tmp_path: Path) -> None:
    python = plugin_python(tmp_path / "venv")
    seen = json.loads(subprocess.run([python, "-I", "-c", _WHAT_IT_SEES], capture_output=True, text=True, check=True).stdout)
    assert seen["package"] == fast_jev_compaction.__file__
    assert Path(seen["prefix"]) == tmp_path / "venv"
    # The bench's interpreter has pytest (it runs this test); the venv sees only its own site-packages
    # and pydantic's links.
    assert seen["pydantic"] and not seen["pytest"] and all(Path(p).is_relative_to(tmp_path) for p in seen["site"])


def test_the_text_report_says_which_transcripts_have_no_memory_figure() -> None:
    # The rows of a transcript under the size (``spawned_memory`` gave nothing) and of one over it.
    small = {"file": "small.jsonl", "peak_over_size": 7.0}
    large = {"file": "large.jsonl", "peak_over_size": 2.1, "cli_over_size": 2.7, "cli_code": 0, "hook_over_size": 2.7}
    lines = spawned_lines([small, large], None)
    assert [line for line in lines if "small.jsonl" in line] == []
    assert any(line.startswith("peak memory over the transcript's size: fast-jev compact 2.7x, hook 2.7x") for line in lines)
    assert any(line.startswith("peak memory: not read for 1 transcript(s) under 1.0 MB") for line in lines)
