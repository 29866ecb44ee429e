"""The upstream token estimator, with JavaScript regex semantics reproduced exactly.

Pieces are ASCII letter runs, ASCII digit runs, and single non-space UTF-16 code units. Python's
``\\s`` and ``\\d`` differ from JavaScript's (U+001C-U+001F, U+0085, U+FEFF; Unicode digits), so
both classes are spelled out. An astral character is two UTF-16 units in JavaScript and costs two
pieces here too.
"""

from __future__ import annotations

import math
import re

# JavaScript's \s: ECMAScript WhiteSpace + LineTerminator.
_JS_SPACE = "\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_PIECE = re.compile(f"([A-Za-z]+)|([0-9]+)|([^{_JS_SPACE}A-Za-z0-9])")
_OTHER_COST = 0.9


def estimate_tokens(text: str) -> int:
    """Estimated Jev tokens for ``text`` (``''`` -> 0, ``hello world`` -> 2)."""
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
