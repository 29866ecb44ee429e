"""A bounded digest of a long tool output: its opening, its closing and the lines that matter.

Head-only cuts lose what logs put at the end (the failing test, the exit status, the totals).
The middle keeps the lines that carry errors, assertions, traceback heads, summaries and id-like
tokens (hashes, ids, URLs), up to the remaining budget, each in place and in order.

Later turns often reuse an output through its names: a path a search listed, a test or function
name, a commit hash, an issue id. The kept lines hold only some of them, so the digest closes with
one line listing the other distinct id-like tokens past the opening (longest first, within their
share of the budget), in the order they appear; what the line leaves of its share goes to the
closing and the key lines. On the corpus evaluation the line keeps one more reused output in
context at the defaults (``policy.py``).
"""

from __future__ import annotations

import heapq
import re
from functools import lru_cache
from typing import Iterator

from .lazy_pattern import lazy_pattern
from .markers import gap, ids_line
from .records import frozen

# A line worth keeping from the middle of a long output.
_KEY_LINE = lazy_pattern(
    r"error|exception|traceback|assert|fail|fatal|panic|denied|refused|timed? ?out|warning|"
    r"\bexit(?:ed)?(?: code| status)?\b|\b\d+ (?:passed|failed|errors?|skipped|tests?)\b|"
    r"^(?:=+|-+|#+) |\bsummary\b|\btotal\b|\bdone\b|\bcreated\b|\bdeployed\b|\bcommit\b",
    re.IGNORECASE | re.MULTILINE,
)
# Tokens that cannot be guessed back: hashes, uuids, long ids, URLs.
_ID_TOKEN = lazy_pattern(
    r"\b[0-9a-f]{12,64}\b|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b|"
    r"https?://\S{6,}|\b[A-Za-z]+_[A-Za-z0-9]{16,}\b"
)
# Every _KEY_LINE match other than a heading rule contains one of these (lower case).
_KEY_WORDS = (
    "error", "exception", "traceback", "assert", "fail", "fatal", "panic", "denied", "refused", "out",
    "warning", "exit", "pass", "skip", "test", "summary", "total", "done", "created", "deployed", "commit",
)
# Non-ASCII letters that IGNORECASE matches to an ASCII letter while lower() keeps them apart.
_FOLDS_TO_ASCII = ("\u0131", "\u017f")
KEY_LINE_CHARS = 240
# An id-like token: a path, a dotted or snake_case name, a hash, a URL, a long id. At least
# ``ID_MIN_CHARS`` characters, at least one of the marks, and not a plain word.
ID_MIN_CHARS = 20
_ID_LIKE = lazy_pattern(r"[\w\-./~@+=%:]{" + str(ID_MIN_CHARS) + ",}")
_ID_MARK = lazy_pattern(r"[0-9/_.\-]")
_ID_TRIM = ".,-/:"
# ... and at least 8 letters or digits: a rule of dashes or dots names nothing.
_EIGHT_ALNUM = lazy_pattern(r"(?:[^A-Za-z0-9]*[A-Za-z0-9]){8}")
# The line of ids gets up to this part (1/IDS_SHARE) of what the opening leaves of the budget.
IDS_SHARE = 2
# Lines are only searched this far into a huge output, so a digest stays cheap; ids, which cost
# more per character, less far.
_MIDDLE_SCAN_CHARS = 2_000_000
_IDS_SCAN_CHARS = 200_000


@frozen
class DigestShape:
    """Character budgets: the whole digest, its opening and its line of ids; the closing and the
    key lines of the middle share the rest equally."""

    budget: int
    head: int
    ids: int = 0

    @property
    def tail(self) -> int:
        return max(0, (self.budget - self.head - self.ids) // 2)

    @property
    def middle(self) -> int:
        return max(0, self.budget - self.head - self.ids - self.tail)


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
    """Spans of key lines between ``start`` and ``end``, in order, within ``budget`` chars.

    Both patterns run once over the whole middle (in C) rather than once per line; the middle is
    sliced so that its edges behave like a line's.
    """
    if budget <= 0 or start >= end:
        return []
    middle = text[start:end]
    scan = min(len(middle), _MIDDLE_SCAN_CHARS)
    # Lazily, in line order: the walk stops as soon as the budget is spent.
    starts = heapq.merge(_key_line_starts(middle, scan), _matching_lines(_ID_TOKEN, middle, scan))
    spans: list[tuple[int, int]] = []
    used = 0
    previous = -1
    for line_start in starts:
        if used >= budget:
            break
        if line_start == previous:
            continue
        previous = line_start
        line_end = middle.find("\n", line_start)
        length = (len(middle) if line_end < 0 else line_end) - line_start
        position = start + line_start
        cut = _safe(text, position + min(length, KEY_LINE_CHARS, budget - used))
        spans.append((position, cut))
        used += cut - position
    return spans


def _matching_lines(pattern: re.Pattern[str], middle: str, scan: int) -> Iterator[int]:
    """Start of each line (before ``scan``) in which ``pattern`` matches, in order, once each."""
    line_end = 0  # lines before this one are done
    for match in pattern.finditer(middle):
        if match.start() < line_end:
            continue
        line_start = middle.rfind("\n", line_end, match.start()) + 1 or line_end
        if line_start >= scan:
            return
        yield line_start
        found = middle.find("\n", match.start())
        line_end = len(middle) if found < 0 else found + 1


def _key_line_starts(middle: str, scan: int) -> Iterator[int]:
    """Lines where ``_KEY_LINE`` matches, in order. Every match holds one of ``_KEY_WORDS`` in
    lower case (or the line opens with ``=``, ``-`` or ``#``), so the lines holding one are found
    with ``str.find`` and only they are searched; the pattern decides."""
    lower = middle.lower()
    if len(lower) != len(middle) or any(char in middle for char in _FOLDS_TO_ASCII):
        # Lower-casing moved positions, or the regex folds a character lower() keeps.
        yield from _matching_lines(_KEY_LINE, middle, scan)
        return
    candidates = {0} if middle[:1] in ("=", "-", "#") else set()
    for word in _KEY_WORDS:
        at = lower.find(word)
        while at >= 0:
            candidates.add(lower.rfind("\n", 0, at) + 1)
            line_end = lower.find("\n", at)
            at = lower.find(word, line_end + 1) if line_end >= 0 else -1
    for opening in ("\n=", "\n-", "\n#"):
        at = middle.find(opening)
        while at >= 0:
            candidates.add(at + 1)
            at = middle.find(opening, at + 1)
    for line_start in sorted(candidates):
        if line_start >= scan:
            return
        line_end = middle.find("\n", line_start)
        if _KEY_LINE.search(middle, line_start, len(middle) if line_end < 0 else line_end):
            yield line_start


@lru_cache(maxsize=1024)
def digest(text: str, shape: DigestShape) -> tuple[str, int]:
    """The digest of ``text`` and how many of its characters it keeps.

    Remembered for the most recent outputs: one compaction asks for the same digest when it
    measures what a cut frees, when it picks the cut's form and when it rebuilds.

    Kept pieces are verbatim slices of the output; each stretch left out is marked with its size.
    The ids are chosen first, among the tokens past the opening; what their share leaves goes to
    the closing and the key lines.
    """
    head_end = _head_end(text, shape.head)
    tokens = _ids_past(text, head_end, shape.ids)
    spare = shape.ids - (len(ids_line(tokens)) if tokens else 0)
    tail_size = shape.tail + max(0, spare) // 2
    middle_size = shape.middle + max(0, spare) - max(0, spare) // 2
    tail_start = max(head_end, _tail_start(text, tail_size, head_end))
    spans = [(0, head_end)] if head_end else []
    spans += _key_lines(text, head_end, tail_start, middle_size)
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
    shown = "\n".join(parts)
    left = [token for token in tokens if token not in shown]
    if left:
        parts.append(ids_line(left))
    return "\n".join(parts), kept


def _ids_past(text: str, start: int, budget: int) -> list[str]:
    """The distinct id-like tokens after ``start`` that the text before it does not hold, the
    longest first within ``budget`` characters (the line's own words included), listed in the
    order they appear."""
    if budget <= 0 or start >= len(text):
        return []
    opening = text[:start]
    raw = dict.fromkeys(match.strip(_ID_TRIM) for match in _ID_LIKE.findall(text, start, start + _IDS_SCAN_CHARS))
    found = [
        token
        for token in raw
        if len(token) >= ID_MIN_CHARS and _ID_MARK.search(token) and _EIGHT_ALNUM.match(token)
    ]
    chosen: set[str] = set()
    used = len(ids_line([]))
    for token in sorted((t for t in found if t not in opening), key=len, reverse=True):
        if used + len(token) + 1 <= budget:
            chosen.add(token)
            used += len(token) + 1
    return [token for token in found if token in chosen]
