"""The lines of an output that the goal names: those that share its rare terms, and the numbered
lines of a file read that another output pointed at.

"What DB pool size does staging use?" names the ``pool_size`` line of a config read, not its
opening. Terms are the goal's words and the parts of its identifiers (``DB_POOL_SIZE``,
``poolSize`` and "pool size" all give ``pool`` and ``size``), lower case, a plural's ``s`` off,
without the words every question has. A term is rare in an output by the share of its lines
that hold it; a line is named when the terms it shares are, together, as rare as one held by
one line in ``RARE_LINES``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Iterator

# A word's parts: an upper-case run (an acronym), a capitalised or lower-case word, digits.
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Words that say how a question is asked, not what it is about.
_STOP = frozenset(
    "a an and any are as at be but by can could did do does doing done for from get got had has have how i if in "
    "into is it its just let like make me my no not now of on or our please run see should so some such than that "
    "the their them then there these they this to up us use used uses using was we were what when where which "
    "while who why will with would yes you your".split()
)
RARE_LINES = 8
_RARE = math.log(RARE_LINES)
# Upper-case ASCII to lower case, and nothing else: positions in the result are the text's own
# (``str.lower`` may lengthen a non-ASCII character), and terms are ASCII.
_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}
# The Read tool's numbered lines: "    42→text" (or a tab after the number, in older versions).
_NUMBERED = re.compile(r"^ *(\d+)(?:→|\t)", re.MULTILINE)


def terms(text: str) -> frozenset[str]:
    """The terms of ``text``: lower case, a plural's ``s`` off, no stop words, no number under 3 digits."""
    found: set[str] = set()
    for part in _PART.findall(text):
        word = part.lower()
        if word in _STOP:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        if len(word) >= 2 and not (word.isdigit() and len(word) < 3):
            found.add(word)
    return frozenset(found)


@lru_cache(maxsize=16)
def focus_terms(goal: str) -> frozenset[str]:
    """What a digest looks for (``DigestShape.focus``): the terms of the goal."""
    return terms(goal)


def focus_lines(text: str, focus: frozenset[str], scan: int) -> list[int]:
    """Starts of the lines (before ``scan``) that share rare terms with ``focus``, the rarest first.

    Each term is found with ``str.find`` in the lower-cased text (a term is a prefix of each of
    its words' forms); only the lines it finds are split into terms.
    """
    if not focus:
        return []
    body = text[:scan]
    lower = body.translate(_ASCII_LOWER)
    held: dict[int, frozenset[str]] = {}
    for line_start in sorted({start for term in focus for start in _lines_holding(lower, term)}):
        line_end = body.find("\n", line_start)
        shared = terms(body[line_start : len(body) if line_end < 0 else line_end]) & focus
        if shared:
            held[line_start] = shared
    holding = Counter(term for shared in held.values() for term in shared)
    lines = body.count("\n") + 1
    # fsum: a frozenset's order follows the hash seed, and a plain float sum in that order could
    # rank two near-equal lines differently from one run to the next.
    scored = [(math.fsum(math.log(lines / holding[term]) for term in shared), start) for start, shared in held.items()]
    return [start for score, start in sorted(scored, key=lambda pair: (-pair[0], pair[1])) if score >= _RARE]


def _lines_holding(lower: str, term: str) -> Iterator[int]:
    at = lower.find(term)
    while at >= 0:
        yield lower.rfind("\n", 0, at) + 1
        line_end = lower.find("\n", at)
        at = lower.find(term, line_end + 1) if line_end >= 0 else -1


def pointed_lines(text: str, pointed: frozenset[int], scan: int) -> list[int]:
    """Starts of the numbered lines of a file read (before ``scan``) whose numbers are in ``pointed``."""
    if not pointed:
        return []
    return [match.start() for match in _NUMBERED.finditer(text, 0, scan) if int(match[1]) in pointed]
