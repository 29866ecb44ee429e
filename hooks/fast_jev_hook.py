"""Claude Code hook entry: JSON event on stdin -> JSON answer on stdout, always exit 0.

Thin on purpose: the work is in ``fast_jev_compaction.hook.entry``. This file only makes sure
that nothing reaches stderr and that even a broken install (the package or a dependency
missing) still answers with a fallback, so the engine runs its built-in summary.
"""

from __future__ import annotations

import gc
import os
import sys
import time

# The mod's timeoutSeconds runs from the spawn; the package's imports already count against it.
_STARTED = time.monotonic()


def _silence_stderr() -> None:
    # The host treats stderr output as a failure, and native code writes to fd 2 directly.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    except OSError:
        pass
    sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process


def _answer_without_package(exc: BaseException) -> int:
    """Stdlib only: drain stdin, log why (in the plugin data folder only), answer a fallback."""
    import json
    import select
    import time

    # Read what the host sends so its write does not fail on a closed pipe; bounded in time.
    deadline = time.monotonic() + 2.0
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([0], [], [], max(0.0, deadline - time.monotonic()))
            if not ready or not os.read(0, 1 << 16):
                break
    except OSError:
        pass
    reason = f"the fast-jev-compaction package cannot be imported ({type(exc).__name__}: {exc})"
    folder = os.environ.get("CLAUDE_PLUGIN_DATA", "")
    try:
        if folder:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
            line = f"[{stamp}Z] pid={os.getpid()} ERROR fallback: {reason} (python {sys.executable})\n"
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
            fd = os.open(os.path.join(folder, "hook.log"), flags, 0o600)
            try:
                os.write(fd, line.encode("utf-8", errors="backslashreplace"))
            finally:
                os.close(fd)
    except (OSError, ValueError):
        pass
    answer = {"action": "fallback", "reason": reason, "toast": f"fallback to built-in summary ({reason})", "log": []}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


def _run() -> int:
    # Everything this process creates (hook.log, the decision log, archives) is the user's alone.
    os.umask(0o077)
    _silence_stderr()
    # The imports make thousands of objects that all live to the end (classes, functions,
    # compiled patterns): collecting while they are made only walks them again and again.
    gc.disable()
    try:
        from fast_jev_compaction.hook.entry import main
    except ImportError:
        # A source checkout used as the plugin: the package sits beside hooks/ in src/. The mod
        # runs this script with -I, so neither this folder nor the cwd is on sys.path; only
        # src/ is added, and only when the installed package is missing.
        src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
        sys.path.insert(0, src)
        try:
            from fast_jev_compaction.hook.entry import main
        except Exception as exc:  # noqa: BLE001
            return _answer_without_package(exc)
    except Exception as exc:  # noqa: BLE001
        return _answer_without_package(exc)
    finally:
        gc.freeze()
        gc.enable()
    try:
        return main(sys.argv[1:], started=_STARTED)
    except BaseException:  # noqa: BLE001 - main answers itself; this only guards the exit code
        return 0


if __name__ == "__main__":
    code = _run()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    # The answer is flushed, the decision log closed, hook.log written unbuffered and the answer
    # cache committed: the interpreter's teardown has nothing left to save, only CPU to spend.
    os._exit(code)
