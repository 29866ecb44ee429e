"""``hook.log``: redacted lines, bounded, private; never a reason to lose the answer."""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..private_files import make_private_dirs, open_private_append, user_temp_dir
from ..redaction import redact_text
from ..textutil import escape_unwritable

HOOK_LOG = "hook.log"

# hook.log is bounded: past this size it becomes hook.log.1 (the one before goes), so the log
# never holds more than twice this.
HOOK_LOG_MAX_BYTES = 4 * 1024 * 1024


def rotate_if_full(path: Path, limit: int = HOOK_LOG_MAX_BYTES) -> None:
    try:
        if path.stat().st_size >= limit:
            os.replace(path, path.with_name(path.name + ".1"))
    except OSError:
        pass  # missing, or a race with another hook rotating it: appending is what matters


@dataclass
class HookLog:
    """Appends redacted lines to ``hook.log`` (0600) in the data folder, else in the per-user
    temp folder; a log that cannot be written anywhere is given up on, never raised."""

    directory: Path | None
    pid: int = field(default_factory=os.getpid)

    def write(self, level: str, message: str) -> None:
        try:
            stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
            text = escape_unwritable(redact_text(message)).replace("\r", " ")
            line = f"[{stamp}] pid={self.pid} {level} {text}".rstrip("\n") + "\n"
            data = line.encode("utf-8", errors="backslashreplace")
        except Exception:  # noqa: BLE001 - logging must never cost the answer
            return
        for folder in (self.directory, None):
            try:
                target = folder if folder is not None else user_temp_dir()
                make_private_dirs(target)
                rotate_if_full(target / HOOK_LOG)
                fd = open_private_append(target / HOOK_LOG)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
                return
            except Exception:  # noqa: BLE001 - try the next folder, then give up quietly
                continue

    def info(self, message: str) -> None:
        self.write("INFO", message)

    def error(self, message: str, exc: BaseException | None = None) -> None:
        if exc is not None:
            import traceback  # only once something failed

            detail = "".join(traceback.format_exception(exc)).rstrip()
            message = f"{message}\n    " + detail.replace("\n", "\n    ")
        self.write("ERROR", message)
