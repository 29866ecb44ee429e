"""Regular expressions compiled on first use.

A module's patterns are otherwise all compiled when it is imported, and compiling one costs far
more than most searches with it: the hook, a process started for one compaction, paid for every
pattern of the lexicon, the digests and the judge, most of which its session never needs.
"""

from __future__ import annotations

import re
from typing import Any, cast

# What callers use of a pattern; after the first use each is the compiled pattern's own.
_ATTRIBUTES = (
    "search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner",
    "pattern", "flags", "groups", "groupindex",
)


class _Lazy:
    """``re.compile(pattern, flags)``, compiled at the first use of any of its attributes."""

    def __init__(self, pattern: str, flags: int) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        # Only reached while nothing is compiled (or for a name no pattern has): the attributes
        # set here are found directly from then on, at the cost of a compiled pattern's own.
        if name.startswith("_"):  # protocols probing for hooks (copy, pickle), or _source unset
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for attribute in _ATTRIBUTES:
            setattr(self, attribute, getattr(compiled, attribute))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_pattern({self._source[0]!r}, {self._source[1]!r})"


def lazy_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Stands for ``re.compile(pattern, flags)``, typed as such, compiled when first used.

    It is not a ``re.Pattern`` instance (``isinstance`` says no); everything else is the same.
    """
    return cast("re.Pattern[str]", _Lazy(pattern, flags))
