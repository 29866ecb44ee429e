"""Prepare the plugin's Python environment once, in the background.

Run as a SessionStart hook (and by the mod when it finds no environment). It must return at once
and print nothing: SessionStart stdout would reach the model. The slow part (``python -m venv``
plus ``pip install <plugin root>``) runs in a detached worker that logs to
``<data>/bootstrap.log``.

Layout under the plugin data folder (``CLAUDE_PLUGIN_DATA``)::

    venv/                  the environment the mod runs the hook with
    venv/.fast-jev-ready   written last: its presence means "ready" (JSON: version, python)
    bootstrap.lock         flock-ed by whoever builds, so two sessions never race
    bootstrap.log          what the worker did

A new plugin version rebuilds: the worker builds beside the old environment and swaps it in.

Knobs (tests, air-gapped installs): ``FAST_JEV_BOOTSTRAP_SOURCE`` installs that path (a wheel)
instead of the plugin root; ``FAST_JEV_BOOTSTRAP_PIP_ARGS`` adds pip arguments;
``FAST_JEV_BOOTSTRAP_SYSTEM_SITE=1`` lets the venv see the base interpreter's packages.
With ``FAST_JEV_PYTHON`` set (the mod then uses that interpreter) there is nothing to prepare.

Stdlib only, and careful with syntax: this runs on whatever ``python3`` the machine has.
"""

from __future__ import annotations

import argparse
import datetime
import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

READY_MARKER = ".fast-jev-ready"
MIN_PYTHON = (3, 11)


def plugin_version(root: Path) -> str:
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return "unknown"
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    return match.group(1) if match else "unknown"


def is_ready(data: Path, version: str) -> bool:
    try:
        marker = json.loads((data / "venv" / READY_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("version") == version and (data / "venv" / "bin" / "python").exists()


def log_line(data: Path, message: str) -> None:
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        with (data / "bootstrap.log").open("a", encoding="utf-8") as fh:
            fh.write(f"[{stamp}] pid={os.getpid()} {message}\n")
    except OSError:
        pass


def take_lock(data: Path) -> int | None:
    """An fd holding an exclusive flock on bootstrap.lock, or None when someone else builds."""
    fd = os.open(str(data / "bootstrap.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise
    return fd


def run_logged(data: Path, argv: list[str]) -> None:
    log_line(data, "$ " + " ".join(shlex.quote(a) for a in argv))
    with (data / "bootstrap.log").open("a", encoding="utf-8") as fh:
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, check=True)


def build(data: Path, root: Path, version: str) -> None:
    """Make venv-build-<pid>, install the package, swap it in as venv/, write the marker last."""
    if sys.version_info < MIN_PYTHON:
        raise RuntimeError(
            f"python {sys.version_info[0]}.{sys.version_info[1]} is too old; fast-jev-compaction needs 3.11+"
        )
    source = os.environ.get("FAST_JEV_BOOTSTRAP_SOURCE") or str(root)
    if not Path(source).exists():
        raise RuntimeError(f"nothing to install at {source}")
    staging = data / f"venv-build-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    venv_args = [sys.executable, "-m", "venv"]
    if os.environ.get("FAST_JEV_BOOTSTRAP_SYSTEM_SITE") == "1":
        venv_args.append("--system-site-packages")
    run_logged(data, venv_args + [str(staging)])
    pip = [str(staging / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    pip += shlex.split(os.environ.get("FAST_JEV_BOOTSTRAP_PIP_ARGS", ""))
    run_logged(data, pip + [source])
    # The hook only ever runs `venv/bin/python`, which finds its packages relative to itself,
    # so the finished environment can be renamed into place.
    target = data / "venv"
    retired = data / f"venv-old-{os.getpid()}"
    if target.exists():
        target.rename(retired)
    staging.rename(target)
    shutil.rmtree(retired, ignore_errors=True)
    marker = {"version": version, "python": sys.executable, "source": source}
    (target / READY_MARKER).write_text(json.dumps(marker), encoding="utf-8")
    log_line(data, f"ready: version {version}")


def worker(data: Path, root: Path, version: str, lock_fd: int) -> int:
    try:
        if not is_ready(data, version):
            build(data, root, version)
    except Exception as exc:  # noqa: BLE001 - logged; the mod keeps using the built-in summary
        log_line(data, f"bootstrap failed: {type(exc).__name__}: {exc}")
        for leftover in data.glob(f"venv-build-{os.getpid()}"):
            shutil.rmtree(leftover, ignore_errors=True)
        return 1
    finally:
        os.close(lock_fd)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("CLAUDE_PLUGIN_DATA"), help="plugin data folder")
    parser.add_argument("--root", default=os.environ.get("CLAUDE_PLUGIN_ROOT") or str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--foreground", action="store_true", help="build in this process and wait")
    parser.add_argument("--worker-fd", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.data:
        return 0  # not run by Claude Code: nowhere to put an environment
    if os.environ.get("FAST_JEV_PYTHON", "").strip() or os.environ.get("CLAUDE_PLUGIN_OPTION_PYTHON", "").strip():
        return 0  # an interpreter is configured explicitly (env or the python option); nothing to prepare
    data = Path(args.data)
    root = Path(args.root)
    version = plugin_version(root)
    if args.worker_fd is not None:
        return worker(data, root, version, args.worker_fd)
    try:
        data.mkdir(parents=True, exist_ok=True)
        if is_ready(data, version):
            return 0
        lock_fd = take_lock(data)
        if lock_fd is None:
            return 0  # another session is building it
        if is_ready(data, version):  # finished while we waited for the lock
            os.close(lock_fd)
            return 0
        if args.foreground:
            return worker(data, root, version, lock_fd)
        # The worker inherits the locked fd, so the lock lives exactly as long as the build.
        with (data / "bootstrap.log").open("a", encoding="utf-8") as log:
            subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--data", str(data), "--root", str(root), "--worker-fd", str(lock_fd)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(lock_fd,),
                start_new_session=True,
            )
        os.close(lock_fd)
        log_line(data, "worker started")
    except Exception as exc:  # noqa: BLE001 - a session start must never fail because of us
        log_line(data, f"bootstrap could not start: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
