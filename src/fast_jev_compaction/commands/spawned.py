"""What a spawned process costs: the hook's start (CPU) and the peak memory of the CLI and the hook.

``fast-jev bench`` reports these beside its in-process numbers. Each figure comes from a real
child process, read with ``os.wait4`` (that child's own CPU time and peak resident size), so it
counts what a user's machine pays: the interpreter, the imports, the work and the teardown.
Peak memory is given over a baseline, the same command on a 30-message transcript, so that it
measures what the transcript costs and not the interpreter and its imports.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

# The hook as the plugin runs it; present in a checkout (the package sits in src/ beside hooks/).
HOOK_SCRIPT = Path(__file__).resolve().parents[3] / "hooks" / "fast_jev_hook.py"
HOOK_EVENT_MESSAGES = 30
# The hook is told to answer with the pruned history whatever the reduction, so the whole path
# (compaction, regrouping, the answer, the decision log) is what is measured; the embedded judge
# whatever keys the environment holds.
HOOK_OPTIONS = {"judge": "local", "minReductionRatio": 0}


@dataclass(frozen=True)
class Child:
    """One finished child process: its exit code, CPU seconds (user + system) and peak RSS in
    bytes; for a hook, the ``action`` it answered ("none" when its output was not one answer)."""

    code: int
    cpu_s: float
    peak_bytes: int
    action: str | None = None


# Started from a small interpreter, not from the bench: a child's peak RSS counts the memory it
# shared with its parent until exec, and the bench's own can be a gigabyte. A hook's answer is
# read here too, from a pipe, so the run that is measured is the one whose answer is checked.
_LAUNCHER = """
import json, os, subprocess, sys
command, stdin, answers = json.loads(sys.argv[1]), sys.argv[2] or os.devnull, sys.argv[3] == "1"
with open(stdin, "rb") as source:
    out = subprocess.PIPE if answers else subprocess.DEVNULL
    process = subprocess.Popen(command, stdin=source, stdout=out, stderr=subprocess.DEVNULL)
    answer = process.stdout.read() if answers else b""
    # wait4 reaps it and gives this child's usage alone (RUSAGE_CHILDREN would mix them all).
    _, status, usage = os.wait4(process.pid, 0)
try:
    action = str(json.loads(answer)["action"]) if answers else None
except (ValueError, KeyError, TypeError):
    action = "none"
print(json.dumps([os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss, action]))
"""


def run_child(command: Sequence[str], stdin: Path | None = None, *, answers: bool = False) -> Child:
    """Run ``command`` to the end and read its own resource usage; its output is discarded, or
    with ``answers`` read as a hook's answer for its ``action``."""
    launched = subprocess.run(
        [sys.executable, "-I", "-c", _LAUNCHER, json.dumps(list(command)), str(stdin or ""), "1" if answers else "0"],
        capture_output=True, text=True, check=True,
    )
    code, cpu_s, maxrss, action = json.loads(launched.stdout)
    # ru_maxrss is in KiB on Linux, in bytes on macOS.
    return Child(code, cpu_s, maxrss * (1 if sys.platform == "darwin" else 1024), action)


def hook_event(messages: list[Any], data_dir: Path) -> dict[str, Any]:
    return {
        "event": "session.compact", "trigger": "manual", "sessionId": "bench", "pluginData": str(data_dir),
        "cwd": str(data_dir), "options": HOOK_OPTIONS, "messages": [m.to_wire() for m in messages],
    }


def _write_event(messages: list[Any], folder: Path, name: str, **options: Any) -> Path:
    path = folder / name
    event = hook_event(messages, folder / f"{name}-data")
    event["options"] = {**HOOK_OPTIONS, **options}
    with path.open("w", encoding="utf-8") as out:
        json.dump(event, out, ensure_ascii=False)
    return path


def _small_messages() -> list[Any]:
    from ..conversation.transcript import parse_transcript
    from ..evaluation.synthetic import transcript_lines

    return parse_transcript(list(transcript_lines(HOOK_EVENT_MESSAGES)))


def hook_command(python: str) -> list[str]:
    """How the plugin's mod starts the hook under ``python`` (``HOOK_SCRIPT`` is only in a checkout)."""
    return [python, "-I", str(HOOK_SCRIPT)]


# What a local compaction imports beside the standard library and the package: pydantic and
# its own dependencies.
VALIDATION_PACKAGES = ("pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection")


def link_validation_packages(folder: Path) -> Path:
    """``folder``, made to hold links to this interpreter's pydantic and its own dependencies
    (:data:`VALIDATION_PACKAGES`) and nothing else."""
    import importlib

    folder.mkdir(parents=True)
    for name in VALIDATION_PACKAGES:
        where = Path(importlib.import_module(name).__file__ or "").resolve()
        source = where.parent if where.name == "__init__.py" else where
        (folder / source.name).symlink_to(source, target_is_directory=source.is_dir())
    return folder


def plugin_python(folder: Path) -> str:
    """An interpreter set up as ``hooks/bootstrap.py`` sets up the plugin's, made in ``folder``.

    A venv of the bench's Python without the system site-packages, made ``--without-pip``, whose
    site-packages holds one ``.pth`` naming the folder the package is in and a folder of links to
    pydantic and its own dependencies (:func:`link_validation_packages`). A compaction with the
    local judge imports nothing else outside the standard library (``tests/test_hook_event.py``
    checks it), so no other location is named: what a site-packages ``.pth`` of the bench's
    interpreter imports at start (this sandbox's imports ``certifi``) is not counted, as the
    plugin's interpreter does not pay it.
    """
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(folder)
    python = str(folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    asked = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    )
    folders = (Path(__file__).resolve().parents[2], link_validation_packages(folder / "validation"))
    lines = "".join(f"{where}\n" for where in folders)
    (Path(asked.stdout.strip()) / "fast_jev_compaction.pth").write_text(lines, encoding="utf-8")
    return python



def hook_start(runs: int) -> dict[str, Any] | None:
    """CPU of a spawned hook answering a generated 30-message event, median and range of ``runs``,
    under an interpreter like the plugin's (``plugin_python``), and of the bare interpreter started
    the same way; then both again under the bench's own interpreter, for comparison.

    All four are interleaved so that they see the same neighbours: on a shared machine, or under a
    Python whose site-packages import something at start, the interpreter alone can cost several
    times its quiet figure, and the hook's number means little without it. Every run's answer is
    read: a hook that could not import what it needs answers ``fallback``, faster, and would pass
    for a quick start.
    """
    if not HOOK_SCRIPT.is_file():
        return None
    with tempfile.TemporaryDirectory(prefix="fast-jev-bench-hook-") as name:
        folder = Path(name)
        pythons = {"plugin": plugin_python(folder / "venv"), "bench": sys.executable}
        event = _write_event(_small_messages(), folder, "event.json")
        hooks: dict[str, list[Child]] = {where: [] for where in pythons}
        bare: dict[str, list[Child]] = {where: [] for where in pythons}
        for _ in range(max(1, runs)):
            for where, interpreter in pythons.items():
                hooks[where].append(run_child(hook_command(interpreter), event, answers=True))
                bare[where].append(run_child([interpreter, "-I", "-c", "pass"]))
    rows = {where: _start_row(hooks[where], bare[where]) for where in pythons}
    return {
        "messages": HOOK_EVENT_MESSAGES,
        "python": f"a venv like the plugin's (of {getattr(sys, '_base_executable', sys.executable)}, "
        "without the system site-packages, holding the package)",
        **rows["plugin"],
        "bench_python": sys.executable,
        "bench_interpreter": rows["bench"],
    }


def _start_row(hooks: list[Child], bare: list[Child]) -> dict[str, Any]:
    cpu_ms = sorted(child.cpu_s * 1000 for child in hooks)
    action = hooks[0].action
    return {
        "runs": len(hooks),
        "action": action,
        "cpu_ms": round(statistics.median(cpu_ms), 1),
        "cpu_ms_min": round(cpu_ms[0], 1),
        "cpu_ms_max": round(cpu_ms[-1], 1),
        "interpreter_cpu_ms": round(statistics.median(child.cpu_s * 1000 for child in bare), 1),
        # A run that answered otherwise than the first did other work: its CPU is not the same figure's.
        "failed": sum(child.code != 0 or child.action != action for child in hooks),
    }


def peak_memory(path: Path) -> dict[str, Any]:
    """Peak RSS over the baseline, for ``fast-jev compact`` on ``path`` and the hook on its event
    (under an interpreter like the plugin's, as for its start), as multiples of the transcript's size."""
    from ..conversation.transcript import read_messages

    size = path.stat().st_size
    cli = [sys.executable, "-I", "-m", "fast_jev_compaction.cli", "compact"]
    with tempfile.TemporaryDirectory(prefix="fast-jev-bench-rss-") as name:
        folder = Path(name)
        small = folder / "small.jsonl"
        from ..evaluation.synthetic import transcript_lines

        small.write_text("".join(line + "\n" for line in transcript_lines(HOOK_EVENT_MESSAGES)), encoding="utf-8")
        out = str(folder / "out.json")
        base = run_child([*cli, str(small), "--out", out, "--no-archive"])
        child = run_child([*cli, str(path), "--out", out, "--no-archive"])
        row: dict[str, Any] = {"cli_over_size": _over(child, base, size), "cli_code": child.code}
        if HOOK_SCRIPT.is_file():
            command = hook_command(plugin_python(folder / "venv"))
            hook_base = run_child(command, _write_event(_small_messages(), folder, "small.json"))
            # All the time the hook may take (the option's bound): a large event's peak is then the
            # compaction's, not a deadline's fallback.
            event = _write_event(read_messages(path), folder, "event.json", timeoutSeconds=600)
            hook = run_child(command, event)
            row.update(hook_over_size=_over(hook, hook_base, size), hook_event_bytes=event.stat().st_size)
    return row


def _over(child: Child, base: Child, size: int) -> float:
    return round(max(0, child.peak_bytes - base.peak_bytes) / size, 2) if size else 0.0
