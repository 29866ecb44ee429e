"""Read the hook's stdin document without ever hanging or silently truncating it.

A host can keep the pipe open without writing (then the hook must give up and answer), or stop
writing halfway through a large document (then the partial JSON must be reported, not parsed).
Reading raw bytes from the file descriptor with ``select`` handles both: EOF resolves, an idle
period with nothing read resolves to empty, an idle period after some bytes is an error.

:class:`StdinText` hands the text over as it arrives, so that the event's reader
(``hook/event.py``) decodes it piece by piece and a large event is never in memory whole.
"""

from __future__ import annotations

import codecs
import os
import select
import time

DEFAULT_IDLE_SECONDS = 3.0
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_CHUNK = 1 << 16
_BOM = "\ufeff"
_SPACE = " \t\n\r"


class StdinError(Exception):
    """Stdin could not be read as one whole document."""


class StdinIdleError(StdinError):
    def __init__(self, received: int, idle_seconds: float) -> None:
        self.received = received
        super().__init__(
            f"stdin went quiet after {received} bytes for {idle_seconds:g}s; the document looks cut short"
        )


class StdinTooLargeError(StdinError):
    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"stdin is larger than the {limit}-byte limit")


class StdinText:
    """Stdin as UTF-8 text (BOM stripped), read on demand; nothing arriving at all reads as empty.

    ``read`` raises :class:`StdinIdleError` when the writer stalls mid-document,
    :class:`StdinTooLargeError` past ``max_bytes`` and :class:`UnicodeDecodeError` on bytes
    that are not UTF-8.
    """

    def __init__(
        self, fd: int = 0, *, idle_seconds: float = DEFAULT_IDLE_SECONDS, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.fd = fd
        self.idle_seconds = idle_seconds
        self.max_bytes = max_bytes
        self.received = 0
        self.eof = False
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._held = ""  # text read ahead by blank()
        self._started = False

    def read(self, least: int = _CHUNK) -> str:
        """At least ``least`` characters, fewer only at the end; ``""`` once it is reached."""
        parts = [self._held] if self._held else []
        count = len(self._held)
        self._held = ""
        while count < least and not self.eof:
            text = self._decoded(self._chunk())
            if text:
                parts.append(text)
                count += len(text)
        return "".join(parts)

    def blank(self) -> bool:
        """Whether the document is empty or only whitespace (what was read stays to be read)."""
        while not self._held.strip(_SPACE):
            if self.eof:
                return True
            self._held += self._decoded(self._chunk())
        return False

    def _decoded(self, chunk: bytes) -> str:
        text = self._decoder.decode(chunk, final=not chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix(_BOM)
        return text

    def _chunk(self) -> bytes:
        """The next bytes from the descriptor; ``b""`` (and ``eof`` set) at the end."""
        # The idle clock restarts whenever bytes arrive: a slow but steady writer is fine.
        deadline = time.monotonic() + self.idle_seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if self.received == 0:
                    self.eof = True
                    return b""
                raise StdinIdleError(self.received, self.idle_seconds)
            try:
                ready, _, _ = select.select([self.fd], [], [], remaining)
            except InterruptedError:  # a signal; just wait again
                continue
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, _CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                self.eof = True
                return b""
            self.received += len(chunk)
            if self.received > self.max_bytes:
                raise StdinTooLargeError(self.max_bytes)
            return chunk
