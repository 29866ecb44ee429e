"""hooks/bootstrap.py: the one-time environment the mod runs the hook with.

Offline and fast: the package is installed from a wheel the test assembles from src/ (no build
backend, no index), and the venv borrows this interpreter's dependencies with
--system-site-packages. Real venvs, real pip, real subprocesses, a real flock.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BOOTSTRAP = REPO / "hooks" / "bootstrap.py"
HOOK = REPO / "hooks" / "fast_jev_hook.py"
VERSION = re.search(r'^version\s*=\s*"([^"]+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)  # type: ignore[union-attr]
SAFETY_TIMEOUT = 300  # a guard against a hung pip, never asserted on


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pure-Python wheel of src/fast_jev_compaction, built by hand (PEP 427)."""
    path = tmp_path_factory.mktemp("wheel") / f"fast_jev_compaction-{VERSION}-py3-none-any.whl"
    dist_info = f"fast_jev_compaction-{VERSION}.dist-info"
    files: dict[str, bytes] = {}
    for source in sorted((REPO / "src" / "fast_jev_compaction").rglob("*.py")):
        files[source.relative_to(REPO / "src").as_posix()] = source.read_bytes()
    files[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: fast-jev-compaction\nVersion: {VERSION}\n".encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test_bootstrap\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [_record_line(name, data) for name, data in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def bootstrap_env(wheel: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "FAST_JEV_"))}
    env.update(
        FAST_JEV_BOOTSTRAP_SOURCE=str(wheel),
        FAST_JEV_BOOTSTRAP_PIP_ARGS="--no-deps --no-index",
        FAST_JEV_BOOTSTRAP_SYSTEM_SITE="1",
    )
    env.update(extra)
    return env


def run_bootstrap(data: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BOOTSTRAP), "--data", str(data), "--root", str(REPO), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=SAFETY_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def log_text(data: Path) -> str:
    path = data / "bootstrap.log"
    return path.read_text() if path.exists() else ""


def test_foreground_build_makes_an_environment_the_hook_runs_in(tmp_path: Path, wheel: Path) -> None:
    data = tmp_path / "data"
    proc = run_bootstrap(data, bootstrap_env(wheel), "--foreground")
    # SessionStart stdout would be read by the model: the bootstrap prints nothing.
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    marker = json.loads((data / "venv" / ".fast-jev-ready").read_text())
    assert marker["version"] == VERSION
    assert not list(data.glob("venv-build-*"))

    python = data / "venv" / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", "import fast_jev_compaction; print(fast_jev_compaction.__file__)"],
        capture_output=True, text=True, timeout=SAFETY_TIMEOUT,
    ).stdout.strip()
    assert where.startswith(str(data / "venv")), where  # the installed copy, not the checkout

    hook = subprocess.run(
        [str(python), str(HOOK)],
        input=json.dumps({"messages": [], "pluginData": str(data)}),
        capture_output=True, text=True, timeout=SAFETY_TIMEOUT,
    )
    assert hook.returncode == 0 and hook.stderr == ""
    assert json.loads(hook.stdout) == {"action": "skip", "reason": "nothing to compact", "log": []}

    # Ready: a second run (the next session start) leaves everything as it is.
    again = run_bootstrap(data, bootstrap_env(wheel))
    assert (again.returncode, again.stdout) == (0, "")
    assert "worker started" not in log_text(data)

    # A new plugin version rebuilds and swaps the environment in.
    (data / "venv" / ".fast-jev-ready").write_text(json.dumps({"version": "0.0.0"}))
    rebuilt = run_bootstrap(data, bootstrap_env(wheel), "--foreground")
    assert rebuilt.returncode == 0
    assert json.loads((data / "venv" / ".fast-jev-ready").read_text())["version"] == VERSION
    assert [p.name for p in data.iterdir() if p.name.startswith("venv")] == ["venv"]  # nothing left behind


def test_background_run_returns_at_once_and_the_worker_holds_the_lock(tmp_path: Path, wheel: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    lock_path = data / "bootstrap.lock"

    # Another session is building: this one must not start a second build.
    held = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        busy = run_bootstrap(data, bootstrap_env(wheel))
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
        os.close(held)
    assert (busy.returncode, busy.stdout) == (0, "")
    assert not (data / "venv").exists() and "worker started" not in log_text(data)

    started = run_bootstrap(data, bootstrap_env(wheel))
    assert (started.returncode, started.stdout) == (0, "")
    assert "worker started" in log_text(data)
    # The detached worker inherited the locked descriptor: taking the lock waits for the build.
    waiter = os.open(lock_path, os.O_RDWR)
    try:
        fcntl.flock(waiter, fcntl.LOCK_EX)
    finally:
        os.close(waiter)
    assert json.loads((data / "venv" / ".fast-jev-ready").read_text())["version"] == VERSION
    assert "ready: version" in log_text(data)


def test_an_explicit_interpreter_needs_no_environment(tmp_path: Path, wheel: Path) -> None:
    data = tmp_path / "data"
    for extra in ({"FAST_JEV_PYTHON": sys.executable}, {"CLAUDE_PLUGIN_OPTION_PYTHON": sys.executable}):
        proc = run_bootstrap(data, bootstrap_env(wheel, **extra), "--foreground")
        assert (proc.returncode, proc.stdout) == (0, "")
    assert not data.exists()


def test_a_failed_build_is_logged_and_leaves_no_marker(tmp_path: Path, wheel: Path) -> None:
    data = tmp_path / "data"
    env = bootstrap_env(wheel, FAST_JEV_BOOTSTRAP_SOURCE=str(tmp_path / "missing.whl"))
    proc = run_bootstrap(data, env, "--foreground")
    assert proc.returncode == 1 and proc.stdout == ""
    assert f"bootstrap failed: RuntimeError: nothing to install at {tmp_path / 'missing.whl'}" in log_text(data)
    assert not (data / "venv").exists()


def test_without_a_data_folder_it_does_nothing(tmp_path: Path, wheel: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BOOTSTRAP)], capture_output=True, text=True, env=bootstrap_env(wheel), cwd=tmp_path,
        timeout=SAFETY_TIMEOUT,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert list(tmp_path.iterdir()) == []
