"""The token estimator (upstream §4.1, §8.1 "token estimate") and JSON.stringify parity (§4.2)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fast_jev_compaction.state.tokens import estimate_tokens
from fast_jev_compaction.textutil import js_json


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("", 0),
        ("hello world", 2),
        ("internationalization", 4),  # 20 letters: 1 + floor(19 / 6)
        ("12345678", 4),  # digits cost half a token each
        ("abcdef", 1),
        ("abcdefg", 2),
        ("1", 1),  # 0.5 rounds up
        ("123", 2),  # 1.5 rounds up
        ("a.b", 3),  # 1 + 0.9 + 1 = 2.9
        ("\u2026", 1),  # the ellipsis is one 0.9 piece
        ("   \t\n  ", 0),  # whitespace is free
        ("é", 1),  # a non-ASCII letter is not in [A-Za-z]: one 0.9 piece
        ("caféx", 3),  # "caf" + "é" + "x": the run is broken by the non-ASCII letter
    ],
)
def test_estimates(text, tokens):
    assert estimate_tokens(text) == tokens


def test_astral_character_costs_two_pieces():
    """Deliberate difference (a) keeps the estimator on UTF-16: an emoji is two JS code units, so
    it costs 2 x 0.9 (one emoji -> 2 tokens, two emoji -> 4), although lengths elsewhere count it
    as one code point."""
    assert estimate_tokens("\U0001F600") == 2
    assert estimate_tokens("\U0001F600\U0001F600") == 4  # 3.6, not 1.8
    assert estimate_tokens("\u00e9\u00e9") == 2  # BMP characters stay one piece each (1.8)


def test_js_whitespace_semantics():
    """JS \\s excludes U+001C..U+001F and includes U+FEFF, the reverse of Python's \\s."""
    for char in "\x1c\x1d\x1e\x1f":
        assert estimate_tokens(char) == 1, hex(ord(char))
    for char in "\ufeff\u00a0\u2003\u3000\u2028\u1680":
        assert estimate_tokens(char) == 0, hex(ord(char))
    assert estimate_tokens("a\ufeffb") == 2  # the BOM only separates two letter runs


def test_only_ascii_digits_are_digits():
    """Arabic-Indic digits are ordinary 0.9 pieces: two cost 1.8 -> 2, not 2/2 -> 1."""
    assert estimate_tokens("\u0663\u0664") == 2
    assert estimate_tokens("\u0663\u0664\u0665\u0666") == 4  # 3.6; as digits it would be 2
    assert estimate_tokens("3456") == 2


def test_letter_runs_are_ascii_only():
    # Fullwidth letters are not [A-Za-z]: four 0.9 pieces.
    assert estimate_tokens("\uff41\uff42\uff43\uff44") == 4


# A JSON value with realistic leaves. Upstream's bound "JSON costs at least ceil(len/3)" holds
# when every piece costs at least a third of a token per character: punctuation (0.9), digits
# (0.5) and letter runs of at most 3 (1). Long letter runs (a 6-letter run costs 1), whitespace
# (free) and long arrays of `false` break it, so `false` is left out and identifiers are built from short runs.
_short_run = st.text(alphabet="abcxyzQRS", min_size=1, max_size=3)
_identifier = st.lists(
    st.one_of(_short_run, st.text(alphabet="0123456789", min_size=1, max_size=4)), min_size=1, max_size=4
).map("_".join)
_path = st.lists(_identifier, min_size=1, max_size=4).map(lambda parts: "/".join(parts) + ".ts")
_leaf = st.one_of(
    st.none(),
    st.just(True),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    _identifier,
    _path,
    st.text(alphabet="{}[]:,.-/\u2026\u00e9\u2192", max_size=8),
)
_containers = lambda children: st.lists(children, max_size=5) | st.dictionaries(_identifier, children, max_size=5)
# Top level is an object or array, as for tool inputs and states: a bare `null` (4 letters, one
# token) is under the bound on its own.
_json_values = _containers(st.recursive(_leaf, _containers, max_leaves=25))


@settings(max_examples=150, deadline=None)
@given(_json_values)
def test_json_costs_at_least_a_third_of_its_length(value):
    text = js_json(value)
    assert estimate_tokens(text) >= math.ceil(len(text) / 3)


def test_prose_json_can_fall_under_a_third():
    """The bound is not universal: whitespace is free and 6-letter runs cost one token."""
    text = js_json({"text": "abcdef " * 20})
    assert estimate_tokens(text) < math.ceil(len(text) / 3)


def test_state_like_json_costs_at_least_a_third():
    state = {"context": "x", "goal": "", "history": [{"i": 0, "role": "user", "text": "start"}]}
    text = js_json(state)
    assert estimate_tokens(text) >= math.ceil(len(text) / 3)


class TestJsJson:
    def test_compact_separators_and_raw_unicode(self):
        assert js_json({"a": [1, "é→😀"], "b": None}) == '{"a":[1,"é→😀"],"b":null}'

    def test_integral_floats_print_without_fraction(self):
        assert js_json({"x": 2.0, "y": [3.0, 0.5], "z": -0.0}) == '{"x":2,"y":[3,0.5],"z":0}'

    def test_lone_surrogates_are_escaped(self):
        assert js_json("a\ud800b") == '"a\\ud800b"'

    def test_keys_keep_insertion_order(self):
        assert js_json({"b": 1, "a": 2}) == '{"b":1,"a":2}'

    def test_round_trips(self):
        value = {"k": [1, 2.5, "s", None, True, {"n": "é"}]}
        assert json.loads(js_json(value)) == value


_PIECES_ALPHABET = st.sampled_from(list("ab Z9-_1.,\n\t\u00e9\u2026\u2192\u3000\u00a0\ufeff\x1c") + ["\U0001F600", "abcdefg", "0.9", "12345"])


@settings(max_examples=400)
@given(st.lists(_PIECES_ALPHABET, max_size=80).map("".join))
def test_counted_estimate_equals_the_piece_by_piece_float_sum(text):
    """The fast path counts pieces in C; the float accumulation of upstream decides only when the
    exact sum lands on an integer. Both must give the same answer everywhere."""
    from fast_jev_compaction.state.tokens import _accumulated

    assert estimate_tokens(text) == _accumulated(text)


# Arbitrary text: any code point, lone surrogates included, and runs of the characters the
# charmap treats apart (JavaScript-only spaces, its frequent characters, its filler range).
_ANY_TEXT = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=())),
    st.lists(
        st.one_of(
            st.sampled_from(
                list("\xa0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff\x1c\x85\u2026\u23ce\ue000\ue07f\u200b")
                + [chr(c) for c in range(0x2000, 0x200B)]
                + ["\U0001F600", "\ud83d", "\ude00", "abcdefg", "0123", " ", "."]
            ),
            st.text(max_size=4),
        )
    ).map("".join),
)


@settings(max_examples=1000, deadline=None)
@given(_ANY_TEXT)
def test_estimate_and_tally_match_the_js_pieces_on_any_text(text):
    """The counted estimate and tally equal upstream's regex pieces added one by one."""
    from fast_jev_compaction.state.tokens import _PIECE, _accumulated, tally

    pieces = [(m.group(1), m.group(2), m.group(3)) for m in _PIECE.finditer(text)]
    tenths = sum(
        10 * (1 + (len(letters) - 1) // 6) if letters else 5 * len(digits) if digits else 9 * (1 + (ord(other) > 0xFFFF))
        for letters, digits, other in pieces
    )
    others = sum(1 + (ord(other) > 0xFFFF) for _, _, other in pieces if other)
    assert tally(text) == (tenths, others)
    assert estimate_tokens(text) == _accumulated(text)


def test_ten_others_accumulate_past_the_integer():
    # 0.9 added ten times is 9.000000000000002 in float: upstream rounds that up to 10.
    assert estimate_tokens("." * 10) == math.ceil(sum([0.9] * 10)) == 10
