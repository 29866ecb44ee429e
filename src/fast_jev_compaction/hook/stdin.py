"""Read the hook's stdin document without ever hanging or silently truncating it.

A host can keep the pipe open without writing (then the hook must give up and answer), or stop
writing halfway through a large document (then the partial JSON must be reported, not parsed).
Reading raw bytes from the file descriptor with ``select`` handles both: EOF resolves, an idle
period with nothing read resolves to empty, an idle period after some bytes is an error.
"""

from __future__ import annotations

import os
import select
import time

DEFAULT_IDLE_SECONDS = 3.0
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"


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


def read_stdin(
    fd: int = 0,
    *,
    idle_seconds: float = DEFAULT_IDLE_SECONDS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> str:
    """Return the whole of stdin as text (BOM stripped), ``""`` when nothing ever arrives.

    Raises :class:`StdinIdleError` when the writer stalls mid-document and
    :class:`StdinTooLargeError` past ``max_bytes``.
    """
    # One growing buffer, decoded in place: a large event is in memory once as bytes, once as text.
    data = bytearray()
    received = 0
    while True:
        # The idle clock restarts whenever bytes arrive: a slow but steady writer is fine.
        deadline = time.monotonic() + idle_seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if received == 0:
                    return ""
                raise StdinIdleError(received, idle_seconds)
            try:
                ready, _, _ = select.select([fd], [], [], remaining)
            except InterruptedError:  # a signal; just wait again
                continue
            if ready:
                break
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            continue
        if not chunk:
            break
        received += len(chunk)
        if received > max_bytes:
            raise StdinTooLargeError(max_bytes)
        data += chunk
    if data.startswith(_BOM):
        del data[: len(_BOM)]
    return data.decode("utf-8", errors="strict")
