"""Whether a value looks generated (a key) rather than written (a word, a path, a hex hash)."""

from __future__ import annotations

import math
from collections import Counter


def _entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def looks_random(value: str, min_length: int = 20, min_entropy: float = 3.5) -> bool:
    """Long, upper and lower case and digits, high per-character entropy: a key, not a word,
    a path or a (single-case) hex hash."""
    if len(value) < min_length:
        return False
    if not (any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value)):
        return False
    return _entropy(value) >= min_entropy
