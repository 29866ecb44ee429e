"""A bounded digest of a long tool output: its opening, its closing and the lines that matter.

Head-only cuts lose what logs put at the end (the failing test, the exit status, the totals);
measured on real sessions, the reused part of an output sits in the first 300 characters only
about half the time, while head 500 + tail 500 covers about 80 %. The middle keeps the lines
that carry errors, assertions, traceback heads, summaries and id-like tokens (hashes, ids,
URLs), up to the remaining budget, each in place and in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .markers import gap

# A line worth keeping from the middle of a long output.
_KEY_LINE = re.compile(
    r"error|exception|traceback|assert|fail|fatal|panic|denied|refused|timed? ?out|warning|"
    r"\bexit(?:ed)?(?: code| status)?\b|\b\d+ (?:passed|failed|errors?|skipped|tests?)\b|"
    r"^(?:=+|-+|#+) |\bsummary\b|\btotal\b|\bdone\b|\bcreated\b|\bdeployed\b|\bcommit\b",
    re.IGNORECASE,
)
# Tokens that cannot be guessed back: hashes, uuids, long ids, URLs.
_ID_TOKEN = re.compile(
    r"\b[0-9a-f]{12,64}\b|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b|"
    r"https?://\S{6,}|\b[A-Za-z]+_[A-Za-z0-9]{16,}\b"
)
KEY_LINE_CHARS = 240
# Lines are only searched this far into a huge output, so a digest stays cheap.
_MIDDLE_SCAN_CHARS = 2_000_000


@dataclass(frozen=True)
class DigestShape:
    """Character budgets: the whole digest and its opening; the closing and the key lines of
    the middle share the rest equally."""

    budget: int
    head: int

    @property
    def tail(self) -> int:
        return max(0, (self.budget - self.head) // 2)

    @property
    def middle(self) -> int:
        return max(0, self.budget - self.head - self.tail)


def _safe(text: str, index: int) -> int:
    """Move a cut off the middle of a surrogate pair (possible in text decoded leniently)."""
    if 0 < index < len(text) and "\ud800" <= text[index - 1] <= "\udbff" and "\udc00" <= text[index] <= "\udfff":
        return index - 1
    return index


def _head_end(text: str, size: int) -> int:
    """End of the opening: at a line break in its last 40 % when there is one."""
    if size <= 0:
        return 0
    end = min(size, len(text))
    cut = text.rfind("\n", int(end * 0.6), end)
    return _safe(text, cut + 1 if cut >= 0 else end)


def _tail_start(text: str, size: int, floor: int) -> int:
    """Start of the closing: just after a line break in its first 40 % when there is one."""
    if size <= 0:
        return len(text)
    start = max(floor, len(text) - size)
    cut = text.find("\n", start, start + int(size * 0.4))
    return _safe(text, cut + 1 if cut >= 0 else start)


def _key_lines(text: str, start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Spans of key lines between ``start`` and ``end``, in order, within ``budget`` chars."""
    spans: list[tuple[int, int]] = []
    used = 0
    position = start
    stop = min(end, start + _MIDDLE_SCAN_CHARS)
    while position < stop and used < budget:
        line_end = text.find("\n", position, end)
        if line_end < 0:
            line_end = end
        line = text[position:line_end]
        if line.strip() and (_KEY_LINE.search(line) or _ID_TOKEN.search(line)):
            cut = _safe(text, position + min(len(line), KEY_LINE_CHARS, budget - used))
            spans.append((position, cut))
            used += cut - position
        position = line_end + 1
    return spans


def digest(text: str, shape: DigestShape) -> tuple[str, int]:
    """The digest of ``text`` and how many of its characters it keeps.

    Kept pieces are verbatim slices of the output; each stretch left out is marked with its size.
    """
    head_end = _head_end(text, shape.head)
    tail_start = max(head_end, _tail_start(text, shape.tail, head_end))
    spans = [(0, head_end)] if head_end else []
    spans += _key_lines(text, head_end, tail_start, shape.middle)
    if tail_start < len(text):
        spans.append((tail_start, len(text)))
    parts: list[str] = []
    kept = 0
    position = 0
    for start, end in spans:
        if start > position:
            parts.append(gap(start - position))
        piece = text[start:end]
        parts.append(piece.rstrip("\n"))
        kept += end - start
        position = end
    if position < len(text):
        parts.append(gap(len(text) - position))
    return "\n".join(parts), kept
