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

Nothing from the user's project runs: Claude Code starts this script from the project folder, so
every interpreter it starts runs with ``-I`` (no cwd, no script folder, no PYTHON* variables, no
user site on ``sys.path``), from the plugin data folder, with PYTHON*/PIP_*/VIRTUAL_ENV removed
from the environment; a planted ``venv.py``, ``pip.py`` or ``sitecustomize.py`` is never
imported. (pip's config files still apply; pip options from the environment go through
``FAST_JEV_BOOTSTRAP_PIP_ARGS``, e.g. ``--index-url``.) Everything created is private (umask 077, files 0600, folders 0700).

Pinned: pip installs with ``-c hooks/constraints.txt``, the exact versions the tests ran.

One pip, no bootstrap download: when this interpreter's pip can drive another environment
(``pip --python``, pip 22.3+), the venv is made ``--without-pip`` and that pip installs into it;
measured on a loaded 2-core machine, ``venv`` with its own pip took 20.5 s, ``--without-pip``
1.1 s. Otherwise the venv gets its bundled pip (offline, from ensurepip) and uses that.

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
CONSTRAINTS = Path("hooks") / "constraints.txt"
PIP_PYTHON_OPTION = (22, 3)  # the first pip with --python
FILE_MODE, FOLDER_MODE = 0o600, 0o700
# Variables that would make a child interpreter or pip import or read something of the project's.
_UNSAFE_ENV_PREFIXES = ("PYTHON", "PIP_")
_UNSAFE_ENV = ("VIRTUAL_ENV", "__PYVENV_LAUNCHER__", "CONDA_PREFIX")


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for child processes, without what redirects Python's or pip's imports."""
    source = os.environ if env is None else env
    return {
        name: value
        for name, value in source.items()
        if not name.startswith(_UNSAFE_ENV_PREFIXES) and name not in _UNSAFE_ENV
    }


def append_private(path: Path) -> int:
    return os.open(str(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)


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
        fd = append_private(data / "bootstrap.log")
        try:
            os.write(fd, f"[{stamp}] pid={os.getpid()} {message}\n".encode("utf-8", errors="backslashreplace"))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        pass


def take_lock(data: Path) -> int | None:
    """An fd holding an exclusive flock on bootstrap.lock, or None when someone else builds."""
    fd = os.open(str(data / "bootstrap.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise
    return fd


def run_logged(data: Path, argv: list[str]) -> None:
    """Run isolated: from the data folder, with a clean environment, output to bootstrap.log."""
    log_line(data, "$ " + " ".join(shlex.quote(a) for a in argv))
    fd = append_private(data / "bootstrap.log")
    try:
        subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT, check=True, cwd=str(data), env=clean_env()
        )
    finally:
        os.close(fd)


def pip_drives_other_pythons() -> bool:
    """Whether this interpreter's own pip has ``--python`` (so the venv needs no pip of its own)."""
    try:
        from importlib.metadata import version

        numbers = [int(part) for part in re.findall(r"\d+", version("pip"))[:2]]
    except Exception:  # noqa: BLE001 - no pip, or unreadable metadata: the venv brings its own
        return False
    return len(numbers) == 2 and tuple(numbers) >= PIP_PYTHON_OPTION


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
    venv_args = [sys.executable, "-I", "-m", "venv"]
    if os.environ.get("FAST_JEV_BOOTSTRAP_SYSTEM_SITE") == "1":
        venv_args.append("--system-site-packages")
    staged_python = str(staging / "bin" / "python")
    if pip_drives_other_pythons():
        run_logged(data, venv_args + ["--without-pip", str(staging)])
        pip = [sys.executable, "-I", "-m", "pip", "--python", staged_python]
    else:
        run_logged(data, venv_args + [str(staging)])
        pip = [staged_python, "-I", "-m", "pip"]
    pip += ["install", "--disable-pip-version-check", "--no-input"]
    constraints = root / CONSTRAINTS
    if constraints.is_file():
        pip += ["-c", str(constraints.resolve())]
    pip += shlex.split(os.environ.get("FAST_JEV_BOOTSTRAP_PIP_ARGS", ""))
    run_logged(data, pip + [str(Path(source).resolve())])
    # The hook only ever runs `venv/bin/python`, which finds its packages relative to itself,
    # so the finished environment can be renamed into place.
    target = data / "venv"
    retired = data / f"venv-old-{os.getpid()}"
    if target.exists():
        target.rename(retired)
    staging.rename(target)
    shutil.rmtree(retired, ignore_errors=True)
    marker = {"version": version, "python": sys.executable, "source": source}
    fd = os.open(str(target / READY_MARKER), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(marker))
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
    os.umask(0o077)  # the venv, the log and the lock are the user's alone
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
    data = Path(args.data).resolve()
    root = Path(args.root).resolve()
    version = plugin_version(root)
    if args.worker_fd is not None:
        return worker(data, root, version, args.worker_fd)
    try:
        data.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
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
        log_fd = append_private(data / "bootstrap.log")
        try:
            script = str(Path(__file__).resolve())
            subprocess.Popen(
                [sys.executable, "-I", script, "--data", str(data), "--root", str(root), "--worker-fd", str(lock_fd)],
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                pass_fds=(lock_fd,),
                start_new_session=True,
                cwd=str(data),
                env=clean_env(),
            )
        finally:
            os.close(log_fd)
        os.close(lock_fd)
        log_line(data, "worker started")
    except Exception as exc:  # noqa: BLE001 - a session start must never fail because of us
        log_line(data, f"bootstrap could not start: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
