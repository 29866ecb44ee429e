"""``lazy_pattern``: a pattern compiled at its first use, matching exactly as ``re.compile``'s."""

from __future__ import annotations

import re

import pytest

from fast_jev_compaction.lazy_pattern import lazy_pattern


def test_it_is_compiled_at_its_first_use_only() -> None:
    source = r"(?P<word>t[a-z]+)-(\d+)\b"
    re.purge()
    pattern = lazy_pattern(source, re.IGNORECASE)
    assert not any(source in key for key in re._cache)  # type: ignore[attr-defined]
    assert pattern.search("x Tea-12 y") is not None
    # Later uses are the compiled pattern's own methods, not a detour through the stand-in.
    assert pattern.search == re.compile(source, re.IGNORECASE).search


def test_every_method_answers_as_the_compiled_pattern() -> None:
    source, flags = r"(?P<word>t[a-z]+)-(\d+)\b", re.IGNORECASE | re.MULTILINE
    lazy, plain = lazy_pattern(source, flags), re.compile(source, flags)
    text = "tea-1 Toe-22\nta-x TIP-333 tip-4a"
    assert lazy.findall(text) == plain.findall(text)
    assert [m.span() for m in lazy.finditer(text, 3, 30)] == [m.span() for m in plain.finditer(text, 3, 30)]
    assert lazy.sub(r"\g<word>", text) == plain.sub(r"\g<word>", text)
    assert lazy.subn("#", text, count=1) == plain.subn("#", text, count=1)
    assert lazy.split(text) == plain.split(text)
    assert lazy.match(text) is not None and lazy.fullmatch("tea-1") is not None and lazy.match("x") is None
    assert (lazy.pattern, lazy.flags, lazy.groups, lazy.groupindex) == (plain.pattern, plain.flags, plain.groups, plain.groupindex)


def test_a_bad_pattern_fails_at_its_first_use() -> None:
    pattern = lazy_pattern("(unclosed")
    with pytest.raises(re.error):
        pattern.search("x")


def test_copies_and_pickles_search_as_the_original() -> None:
    import copy
    import pickle

    pattern = lazy_pattern(r"\bx+\b")
    for twin in (copy.copy(pattern), copy.deepcopy(pattern), pickle.loads(pickle.dumps(pattern))):
        assert twin.findall("x xx y") == ["x", "xx"]
