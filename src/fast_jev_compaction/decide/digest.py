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

Two kinds of line come before the key lines, and may spend the closing's share too: those the
goal names (``focus.py``), and, in a file read, those another output pointed at. A test run that
reports failures has a digest of its own (``_run_digest``): its failures, not its passes.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Iterator

from ..options import FAILURES_FACTOR
from . import runs
from .focus import focus_lines, pointed_lines
from .markers import gap, ids_line

# A line worth keeping from the middle of a long output.
_KEY_LINE = re.compile(
    r"error|exception|traceback|assert|fail|fatal|panic|denied|refused|timed? ?out|warning|"
    r"\bexit(?:ed)?(?: code| status)?\b|\b\d+ (?:passed|failed|errors?|skipped|tests?)\b|"
    r"^(?:=+|-+|#+) |\bsummary\b|\btotal\b|\bdone\b|\bcreated\b|\bdeployed\b|\bcommit\b",
    re.IGNORECASE | re.MULTILINE,
)
# Tokens that cannot be guessed back: hashes, uuids, long ids, URLs.
_ID_TOKEN = re.compile(
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
_ID_LIKE = re.compile(r"[\w\-./~@+=%:]{" + str(ID_MIN_CHARS) + ",}")
_ID_MARK = re.compile(r"[0-9/_.\-]")
_ID_TRIM = ".,-/:"
# ... and at least 8 letters or digits: a rule of dashes or dots names nothing.
_EIGHT_ALNUM = re.compile(r"(?:[^A-Za-z0-9]*[A-Za-z0-9]){8}")
# The line of ids gets up to this part (1/IDS_SHARE) of what the opening leaves of the budget.
IDS_SHARE = 2
# Lines are only searched this far into a huge output, so a digest stays cheap; ids, which cost
# more per character, less far.
_MIDDLE_SCAN_CHARS = 2_000_000
_IDS_SCAN_CHARS = 200_000


@dataclass(frozen=True)
class DigestShape:
    """Character budgets: the whole digest, its opening and its line of ids; the closing and the
    key lines of the middle share the rest equally."""

    budget: int
    head: int
    ids: int = 0
    # The goal's terms (``focus.focus_terms``): the middle's lines that share its rare ones come
    # first among the key lines.
    focus: frozenset[str] = frozenset()

    @property
    def tail(self) -> int:
        return max(0, (self.budget - self.head - self.ids) // 2)

    @property
    def middle(self) -> int:
        return max(0, self.budget - self.head - self.ids - self.tail)

    @property
    def failures(self) -> int:
        """What the digest of a test run with failures may be long, in all."""
        return self.budget * FAILURES_FACTOR


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


def _key_lines(text: str, start: int, end: int, budget: int, taken: set[int]) -> list[tuple[int, int]]:
    """Spans of key lines between ``start`` and ``end``, in order, within ``budget`` chars, but
    for the lines that start at ``taken``.

    Both patterns run once over the whole middle (in C) rather than once per line; the middle is
    sliced so that its edges behave like a line's.
    """
    if budget <= 0 or start >= end:
        return []
    middle = text[start:end]
    scan = min(len(middle), _MIDDLE_SCAN_CHARS)
    # Lazily, in line order: the walk stops as soon as the budget is spent.
    starts = heapq.merge(_key_line_starts(middle, scan), _matching_lines(_ID_TOKEN, middle, scan))
    return _lines_at(text, (start + line_start for line_start in starts), end, budget, taken)


def _lines_at(text: str, starts: Iterable[int], end: int, budget: int, taken: set[int]) -> list[tuple[int, int]]:
    """Spans of the lines that open at ``starts``, in that order, each cut at ``KEY_LINE_CHARS``
    and at ``end``, within ``budget`` chars; ``taken`` (the starts taken already) grows."""
    spans: list[tuple[int, int]] = []
    used = 0
    for position in starts:
        if used >= budget:
            break
        if position in taken:
            continue
        taken.add(position)
        line_end = text.find("\n", position, end)
        length = (end if line_end < 0 else line_end) - position
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
def digest(text: str, shape: DigestShape, pointed: frozenset[int] = frozenset()) -> tuple[str, int]:
    """The digest of ``text`` and how many of its characters it keeps.

    ``pointed``: when ``text`` is a file read, the numbers of its lines that another output (a
    search hit, an error, a stack frame) pointed at; they are kept first.

    Remembered for the most recent outputs: one compaction asks for the same digest when it
    measures what a cut frees, when it picks the cut's form and when it rebuilds.

    Kept pieces are verbatim slices of the output; each stretch left out is marked with its size.
    The ids are chosen first, among the tokens past the opening; what their share leaves goes to
    the closing and the key lines.
    """
    scan = min(len(text), _MIDDLE_SCAN_CHARS)
    named = pointed_lines(text, pointed, scan) + focus_lines(text, shape.focus, scan)
    if runs.has_failures(text, scan):
        return _run_digest(text, shape, named, scan)
    head_end = _head_end(text, shape.head)
    # The lines named come first: they may spend the middle's share and the closing's (not the
    # ids': on the corpus evaluation with the goal as the named terms, spending the ids' share
    # left 10 more reused outputs gone, the closing's 1).
    taken: set[int] = set()
    named_end = max(head_end, len(text) - shape.tail)
    named_spans = _lines_at(
        text, (at for at in named if head_end <= at < named_end), named_end, shape.middle + shape.tail, taken
    )
    named_chars = sum(end - start for start, end in named_spans)
    tokens = _ids_past(text, head_end, shape.ids)
    spare = shape.ids - (len(ids_line(tokens)) if tokens else 0)
    tail_size = shape.tail - max(0, named_chars - shape.middle) + max(0, spare) // 2
    middle_size = max(0, shape.middle - named_chars) + max(0, spare) - max(0, spare) // 2
    tail_start = max(head_end, _tail_start(text, tail_size, head_end))
    spans = [(0, head_end)] if head_end else []
    spans += [(start, min(end, tail_start)) for start, end in named_spans if start < tail_start]
    spans += _key_lines(text, head_end, tail_start, middle_size, taken)
    spans.sort()
    if tail_start < len(text):
        spans.append((tail_start, len(text)))
    parts, kept = _assembled(text, spans)
    shown = "\n".join(parts)
    left = [token for token in tokens if token not in shown]
    if left:
        parts.append(ids_line(left))
    return "\n".join(parts), kept


def _assembled(text: str, spans: list[tuple[int, int]]) -> tuple[list[str], int]:
    """The pieces of ``text`` at ``spans`` (in order, apart), each stretch between them marked
    with its size, and how many characters the pieces hold."""
    parts: list[str] = []
    kept = 0
    position = 0
    for start, end in spans:
        # A lone line break between two pieces is the one that joins them.
        if start > position and (start - position > 1 or text[position] != "\n" or not parts):
            parts.append(gap(start - position))
        piece = text[start:end]
        parts.append(piece.rstrip("\n"))
        kept += end - start
        position = end
    if position < len(text):
        parts.append(gap(len(text) - position))
    return parts, kept


def _run_digest(text: str, shape: DigestShape, named: list[int], scan: int) -> tuple[str, int]:
    """The digest of a test run with failures, at most ``shape.failures`` characters long in all.

    Whole lines are taken, best first, while the digest they make stays within that: each
    failing test's name and the totals, its assertions, the lines named (``named``), then the
    failures' details (file:line, the failing statement, a diff); a failure's lines one of each
    failure in turn, so that a long first failure does not crowd out the others. Then the other
    key lines, the closing and the opening, each within its share of an ordinary digest (the
    middle's, the tail's, the head's), and the line of ids within its own. Passing tests' lines,
    and their ids, are never taken.
    """
    lines = _line_spans(text, scan)
    kinds = [runs.line_kind(text[start:end]) for start, end in lines]
    index_of = {start: index for index, (start, _) in enumerate(lines)}
    limit = shape.failures
    picker = _Picker(text, lines, limit)
    for tier in (runs.FAILED_TEST, runs.ASSERTION, None, runs.DETAIL):
        for index in _in_turn(kinds, tier) if tier is not None else (index_of[start] for start in named):
            picker.take(index)
    # The rest get no more than a digest of any other output would give them.
    ceiling = picker.length + shape.middle
    for index, (start, end) in enumerate(lines):
        if kinds[index] != runs.PASSED and _KEY_LINE.search(text, start, end):
            picker.take(index, ceiling)
    for order, share in ((reversed(range(len(lines))), shape.tail), (range(len(lines)), shape.head)):
        ceiling = picker.length + share
        for index in order:  # the closing, then the opening
            if kinds[index] != runs.PASSED and lines[index][1] > lines[index][0] and not picker.take(index, ceiling):
                break
    for index in range(1, len(lines) - 1):  # a blank line between two taken ones costs less than its gap
        if lines[index][1] == lines[index][0] and index - 1 in picker.cuts and index + 1 in picker.cuts:
            picker.take(index)
    parts, kept = _assembled(text, picker.spans())
    room = min(limit - picker.length - 1, shape.ids)
    shown = "\n".join(parts)
    # Ids of the lines that are not passing tests': a run's passing tests are not what it is reused for.
    rest = "\n".join(text[start:end] for index, (start, end) in enumerate(lines) if kinds[index] != runs.PASSED)
    left = [token for token in _ids_past(rest, 0, room) if token not in shown]
    if left:
        parts.append(ids_line(left))
    return "\n".join(parts), kept


def _line_spans(text: str, scan: int) -> list[tuple[int, int]]:
    """Each line (before ``scan``) as (start, end), its line break not included."""
    lines: list[tuple[int, int]] = []
    start = 0
    while start < scan:
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        lines.append((start, end))
        start = end + 1
    return lines


def _in_turn(kinds: list[int], kind: int) -> list[int]:
    """The lines of ``kind``: the first of each failure's, then the second of each, and so on.

    A failure's lines follow the line of a failing or a passing test (go prints a failure's
    lines after its ``=== RUN``) up to the next such line.
    """
    ranked: list[tuple[int, int]] = []
    rank = 0
    for index, found in enumerate(kinds):
        if found in (runs.FAILED_TEST, runs.PASSED):
            rank = 0
        if found == kind:
            ranked.append((rank, index))
            rank += 1
    return [index for _, index in sorted(ranked)]


class _Picker:
    """Whole lines taken into a digest one by one, each only if the digest stays within ``limit``.

    ``length`` bounds the digest's length from above: every piece and every gap with the line
    break that joins it, a gap counted at its longest. A line taken whole runs on into the next
    one when that is taken too (no gap between them); a line longer than ``KEY_LINE_CHARS`` is
    cut there, and a gap follows it.
    """

    def __init__(self, text: str, lines: list[tuple[int, int]], limit: int) -> None:
        self._text = text
        self._lines = lines
        self._limit = limit
        self._gap = len(gap(len(text))) + 1
        # By line index, where its kept piece ends.
        self.cuts: dict[int, int] = {}
        self.length = self._gap - 1  # an empty digest is one gap

    def _whole(self, index: int) -> bool:
        start, end = self._lines[index]
        return end - start <= KEY_LINE_CHARS

    def take(self, index: int, ceiling: int | None = None) -> bool:
        """Take line ``index``, unless the digest would grow past ``limit`` (or ``ceiling``, when
        lower); whether the line is in the digest now."""
        if index in self.cuts:
            return True
        start, end = self._lines[index]
        whole = self._whole(index)
        joins = 0
        if whole and index - 1 in self.cuts and self._whole(index - 1):
            joins += 1
        if whole and index + 1 in self.cuts:
            joins += 1
        piece = min(end - start, KEY_LINE_CHARS)
        added = piece + 1 + (1 - joins) * self._gap
        if self.length + added > (self._limit if ceiling is None else min(self._limit, ceiling)):
            return False
        self.length += added
        # A whole line's piece holds its line break, so that the next line, taken too, follows it.
        self.cuts[index] = _safe(self._text, start + piece) if not whole else min(end + 1, len(self._text))
        return True

    def spans(self) -> list[tuple[int, int]]:
        return [(self._lines[index][0], self.cuts[index]) for index in sorted(self.cuts)]


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
