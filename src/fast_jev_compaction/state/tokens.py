"""The upstream token estimator, with JavaScript regex semantics reproduced exactly.

Pieces are ASCII letter runs, ASCII digit runs, and single non-space UTF-16 code units. Python's
``\\s`` and ``\\d`` differ from JavaScript's (U+001C-U+001F, U+0085, U+FEFF; Unicode digits), so
both classes are spelled out. An astral character is two UTF-16 units in JavaScript and costs two
pieces here too.

Counting is done in C: the text is mapped to one class byte per character (letter ``a``, digit
``0``, space, other ``.``), each letter run's first letter is marked ``A``, and ``bytes.count``
gives the runs, the extra 6-letter blocks, the digits and the other pieces. A non-ASCII
character is never in a letter or digit run: the tally reads a text's UTF-8 bytes, each lead
byte one other piece (two for an astral character) and each continuation byte a space, and
only where a continuation byte could end one of JavaScript's non-ASCII spaces are the few
non-ASCII characters classed apart (a charmap codec takes those spaces to a space byte), which
spares the whole text the charmap's per-character lookup. The sum is exact
in tenths; only when it lands on an integer can the float accumulation of JavaScript round it
up, and then the pieces are added one by one as upstream does.
"""

from __future__ import annotations

import codecs
import math
import re
from collections import deque
from itertools import accumulate
from typing import Callable

from ..textutil import JSON_SHORT_ESCAPES, plain_json

# JavaScript's \s: ECMAScript WhiteSpace + LineTerminator.
_JS_SPACE = "\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_PIECE = re.compile(f"([A-Za-z]+)|([0-9]+)|([^{_JS_SPACE}A-Za-z0-9])")
_OTHER_COST = 0.9
_WIDE_SPACES = "\xa0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff" + "".join(map(chr, range(0x2000, 0x200B)))
# A character's byte in the charmap: ASCII as itself, the non-ASCII spaces from 0x80 on, then
# frequent non-ASCII characters (spared the codec's error path); any other character is "?".
_FREQUENT = "\u23ce\u2026\u2192\u2190\u2014\u2013\u2018\u2019\u201c\u201d\u2022\u00b7\u00d7\u00e9\u00e8\u00e0\u00fc\u00f6\u00e4\u2713\u2717\u2502\u251c\u2514\u2500"
_CHARMAP = codecs.charmap_build(
    "".join(map(chr, range(128))) + _WIDE_SPACES + _FREQUENT
    + "".join(chr(0xE000 + i) for i in range(128 - len(_WIDE_SPACES) - len(_FREQUENT)))
)
_LETTERS = bytes(b if b in b"aA" else ord(" ") for b in range(256))
_CLASSES = bytes(
    ord("a") if chr(b).isascii() and chr(b).isalpha() else
    ord("0") if chr(b).isascii() and chr(b).isdigit() else
    ord(" ") if chr(b) in "\t\n\x0b\x0c\r " or 0x80 <= b < 0x80 + len(_WIDE_SPACES) else
    ord(".")
    for b in range(256)
)
# UTF-8 bytes as the tally reads them (see _non_ascii_others): ASCII by its class, the lead byte
# of a BMP character as one "other" piece, that of an astral character as "#" (two), and the
# continuation bytes as spaces, but for those that end one of JavaScript's non-ASCII spaces in
# UTF-8: "y" for A0 (U+00A0), and "x" for the others, so that each of those spaces shows "y" or
# "xx" (its last two bytes), which few other characters do.
_MAYBE_NBSP, _MAYBE_WIDE, _ASTRAL, _SPACE = b"yx# "
_MAYBE_WIDE_ENDING = b"xx"
_WIDE_SPACES_UTF8 = [space.encode("utf-8") for space in _WIDE_SPACES]
_UTF8_CLASSES = _CLASSES[:128] + bytes(
    _MAYBE_NBSP if b == 0xA0 else
    _MAYBE_WIDE if any(b in space[-2:] for space in _WIDE_SPACES_UTF8 if len(space) == 3) else
    _SPACE
    for b in range(0x80, 0xC0)
) + b"." * 48 + bytes([_ASTRAL]) * 16
# UTF-8 bytes, a character each: as _UTF8_CLASSES, but every continuation byte a space (they
# are dropped).
_UTF8_UNITS = _UTF8_CLASSES[:0x80] + b" " * 64 + _UTF8_CLASSES[0xC0:]
_WIDE_SPACE_SET = frozenset(_WIDE_SPACES)
_WIDE_TO_SPACE = dict.fromkeys(map(ord, _WIDE_SPACES), " ")
_CONTINUATION = bytes(range(0x80, 0xC0))
_ASCII = bytes(range(128))
# Class bytes as integers (``bytes.count`` and ``in`` take one without a buffer, and ``in`` with
# a bytes operand first fails as an integer, building a TypeError that costs more than the search).
_OTHER, _DIGIT, _RUN_START = b".0A"
# The class bytes of a text as its JSON string shows it (see json_tally): ``"`` and ``\\`` as
# ``"``, the five characters JSON escapes with a letter as ``A`` (a letter that starts a run),
# other control characters as ``u``.
_QUOTE, _HEX_ESCAPE = b'"u'
_JSON_CLASSES = bytes(
    _QUOTE if b in b'"\\' else
    _RUN_START if b in JSON_SHORT_ESCAPES else
    _HEX_ESCAPE if b < 0x20 else
    _CLASSES[b]
    for b in range(256)
)
_UTF8_JSON_CLASSES = _JSON_CLASSES[:128] + _UTF8_CLASSES[128:]


def estimate_tokens(text: str) -> int:
    """Estimated Jev tokens for ``text`` (``''`` -> 0, ``hello world`` -> 2)."""
    estimate = from_tally(*tally(text))
    return ordered_estimate(text) if estimate is None else estimate


def ordered_estimate(text: str) -> int:
    """:func:`estimate_tokens` of a text whose tally :func:`from_tally` leaves undecided (known
    from its parts): the pieces are added in order at once, without being counted first."""
    # The pieces in order, one word each (a letter run, a digit run, a lone "."), costed through
    # a dict and added left to right, all in C (the running sums of accumulate, of which a deque
    # keeps the last, add without reduce's call of an add function per piece).
    pieces = _unit_classes(text).replace(b".", b" . ").replace(b"a0", b"a 0").replace(b"0a", b"0 a").split()
    return math.ceil(deque(accumulate(map(_COSTS.__getitem__, pieces), initial=0.0), maxlen=1)[0])


def _unit_classes(text: str) -> bytes:
    """One class byte per UTF-16 unit of ``text``, in order (an astral character is two ".")."""
    if text.isascii():
        return text.encode("ascii").translate(_CLASSES)
    utf8 = text.encode("utf-8", "surrogatepass")
    # Through the UTF-8 bytes, a non-ASCII character is its lead byte; the few JavaScript spaces
    # among them are made plain spaces first.
    if not _WIDE_SPACE_SET.isdisjoint(utf8.translate(None, _ASCII).decode("utf-8", "surrogatepass")):
        utf8 = text.translate(_WIDE_TO_SPACE).encode("utf-8", "surrogatepass")
    return utf8.translate(_UTF8_UNITS, _CONTINUATION).replace(b"#", b"..")


def most_tokens(text: str) -> int:
    """An upper bound on ``estimate_tokens(text)`` from its length alone: no character adds more
    than 2 (a lone letter adds 1, an astral character 1.8), and rounding adds at most 1."""
    return 2 * len(text) + 1


def tally(text: str) -> tuple[int, int]:
    """The exact cost of ``text``'s pieces in tenths of a token, and how many 0.9 pieces it has.

    Tallies add up over texts joined where no letter or digit run is split (JSON fragments, which
    begin and end with punctuation), so a text's estimate can be had from its parts' tallies.
    """
    if len(text) > _SHORT:
        return _tally(text)
    return _SHORT_TALLIES.get(text) or _kept(text, _SHORT_TALLIES, _tally)


_SHORT = 32
_SHORT_KEPT = 4096
_SHORT_TALLIES: dict[str, tuple[int, int]] = {}


def _kept(text: str, kept: dict[str, tuple[int, int]], work: Callable[[str], tuple[int, int]]) -> tuple[int, int]:
    # Short texts are mostly the same few (roles, tool names, ids, empty texts): kept once each.
    found = work(text)
    if len(kept) < _SHORT_KEPT:
        kept[text] = found
    return found


def from_tally(tenths: int, others: int) -> int | None:
    """The estimate of a text with this tally; None when it depends on the order of its pieces
    (a whole exact sum with 0.9 pieces in it, which JavaScript's float additions can push up)."""
    if tenths % 10:
        return tenths // 10 + 1
    if others == 0:
        return tenths // 10  # halves and integers add exactly in floating point
    return None


def tally_bounds(tenths: int, others: int) -> tuple[int, int]:
    """The least and the most the estimate of a text with this tally can be: the same where
    :func:`from_tally` decides it; else the exact sum, or one more where JavaScript's float
    additions push it up."""
    tokens = from_tally(tenths, others)
    return (tenths // 10, tenths // 10 + 1) if tokens is None else (tokens, tokens)


def _tally(text: str) -> tuple[int, int]:
    if text.isascii():
        classes = text.encode("ascii").translate(_CLASSES)
        others = classes.count(_OTHER)
    else:
        utf8 = text.encode("utf-8", "surrogatepass")
        classes = utf8.translate(_UTF8_CLASSES)
        others = classes.count(_OTHER) + _non_ascii_others(utf8, classes)
    return _counted(classes, others)


def json_tally(text: str) -> tuple[int, int]:
    r"""``tally(plain_json(text))`` without writing the JSON: the text's class bytes are those of
    its JSON with each escape in one byte. ``"`` and ``\\`` are written as two "other"
    characters, and ``\n``, ``\t``, ``\r``, ``\b`` and ``\f`` as a backslash (one other) and a
    letter that starts a run (it is marked ``A`` at once, so the letters after it join it and
    those before it do not). A text with another control character or a lone surrogate, which
    JSON writes as ``\u`` and four hexadecimal digits, is written and tallied."""
    if len(text) > _SHORT:
        return _json_tally(text)
    return _SHORT_JSON_TALLIES.get(text) or _kept(text, _SHORT_JSON_TALLIES, _json_tally)


_SHORT_JSON_TALLIES: dict[str, tuple[int, int]] = {}


def _json_tally(text: str) -> tuple[int, int]:
    if text.isascii():
        classes = text.encode("ascii").translate(_JSON_CLASSES)
        extra = 0
    else:
        try:
            utf8 = text.encode("utf-8")
        except UnicodeEncodeError:
            return tally(plain_json(text))
        classes = utf8.translate(_UTF8_JSON_CLASSES)
        extra = _non_ascii_others(utf8, classes)
    if _HEX_ESCAPE in classes:
        return tally(plain_json(text))
    # The quotes around the text, and a backslash before each escaped character; most texts have
    # no escaped letter and many no quote, which a memchr finds sooner than a count.
    others = 2 + classes.count(_OTHER) + extra
    if _QUOTE in classes:
        others += 2 * classes.count(_QUOTE)
    if _RUN_START in classes:
        others += classes.count(_RUN_START)
    return _counted(classes, others)


def _non_ascii_others(utf8: bytes, classes: bytes) -> int:
    """The "other" pieces of the non-ASCII characters of these UTF-8 bytes beyond one for each
    BMP character, whose lead byte ``classes`` (their _UTF8_CLASSES) show as ".": an
    astral character is two, and a JavaScript space none. Only where a continuation byte could
    end such a space are the non-ASCII characters classed alone (through the charmap codec)."""
    others = 2 * classes.count(_ASTRAL) if _ASTRAL in classes else 0
    if _MAYBE_NBSP in classes or classes.find(_MAYBE_WIDE_ENDING) >= 0:
        rest = utf8.translate(None, _ASCII).decode("utf-8", "surrogatepass")
        others -= _classes(rest)[0].count(_SPACE)
    return others


def _counted(classes: bytes, others: int) -> tuple[int, int]:
    # Letters as "a" and the rest as spaces, after a space: one replacement marks each run's
    # first letter (three are needed on the class bytes themselves). A letter marked "A"
    # already starts a run.
    marked = (b" " + classes.translate(_LETTERS)).replace(b" a", b" A")
    letters = marked.count(_RUN_START) + marked.count(b"aaaaaa")
    # Many texts have no digit, which a memchr finds sooner than a count.
    digits = classes.count(_DIGIT) if _DIGIT in classes else 0
    return 10 * letters + 5 * digits + 9 * others, others


def _classes(text: str) -> tuple[bytes, int]:
    """One class byte per character, and how many characters are astral."""
    if text.isascii():
        return text.encode("ascii").translate(_CLASSES), 0
    classes = codecs.charmap_encode(text, "replace", _CHARMAP)[0].translate(_CLASSES)
    # Each astral character is one "." byte and a second UTF-16 unit (the codec called directly:
    # str.encode looks this one up by name each time).
    return classes, len(codecs.utf_16_le_encode(text, "surrogatepass")[0]) // 2 - len(text)


class _PieceCosts(dict[bytes, float]):
    """Cost of a piece of the class bytes (``aaa``, ``00``, ``.``), filled on demand."""

    def __missing__(self, piece: bytes) -> float:
        kind = piece[:1]
        value: float = 1 + (len(piece) - 1) // 6 if kind == b"a" else len(piece) / 2 if kind == b"0" else _OTHER_COST
        self[piece] = value
        return value


_COSTS = _PieceCosts()


def _accumulated(text: str) -> int:
    """The estimate summed piece by piece in float, as JavaScript does."""
    total = 0.0
    for match in _PIECE.finditer(text):
        letters, digits, other = match.groups()
        if letters is not None:
            total += 1 + (len(letters) - 1) // 6
        elif digits is not None:
            total += len(digits) / 2
        else:
            total += _OTHER_COST
            if ord(other) > 0xFFFF:  # the second half of a surrogate pair
                total += _OTHER_COST
    return math.ceil(total)


# The tally of ``""``, an empty JSON string: what a rendering's text costs beyond its quotes.
QUOTES_TENTHS = tally('""')[0]
