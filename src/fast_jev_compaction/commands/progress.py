"""A progress line on stderr for long work, shown only when stderr is a terminal.

Piped or redirected, nothing is written, so scripts and logs see only the final result. The line
redraws in place once a second (elapsed time included, so a slow judge never looks hung), and
``note`` leaves a line of its own for events worth keeping, such as a retry.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

_CLEAR = "\r\x1b[2K"
# Quick work draws nothing: the line appears once the work has taken this long.
SHOW_AFTER_S = 0.5


class Progress:
    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._text = ""
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._clear()

    def update(self, text: str) -> None:
        """Replace what the line says (the elapsed time is appended when drawn)."""
        with self._lock:
            self._text = text
        self._draw()

    def note(self, text: str) -> None:
        """A line that stays (``retrying after 429 (1/2)…``)."""
        if not self.enabled:
            return
        with self._lock:
            self.stream.write(f"{_CLEAR}{text}\n")
            self.stream.flush()
            self._drawn = False
        self._draw()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self._draw()

    def _draw(self) -> None:
        if not self.enabled or not self._text:
            return
        elapsed = time.monotonic() - self._started
        if elapsed < SHOW_AFTER_S:
            return
        with self._lock:
            self.stream.write(f"{_CLEAR}{self._text} ({elapsed:.0f} s)")
            self.stream.flush()
            self._drawn = True

    def _clear(self) -> None:
        with self._lock:
            if self._drawn:
                self.stream.write(_CLEAR)
                self.stream.flush()
                self._drawn = False


class CountingAsker:
    """Wraps a judge so the progress line counts answered and waiting requests."""

    def __init__(self, inner: Any, progress: Progress) -> None:
        self.inner = inner
        self.progress = progress
        self.answered = 0
        self.waiting = 0

    def __getattr__(self, name: str) -> Any:
        # Other capabilities of the judge (an in-process ``score_calls``) pass through unchanged.
        return getattr(self.inner, name)

    async def ask(self, state: Any, questions: Any) -> Any:
        self.waiting += 1
        self._show()
        try:
            return await self.inner.ask(state, questions)
        finally:
            self.waiting -= 1
            self.answered += 1
            self._show()

    def _show(self) -> None:
        self.progress.update(f"asking the judge: {self.answered} answered, {self.waiting} waiting")
